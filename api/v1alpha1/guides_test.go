package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// guideRoom is a room a guide shows: a WaitingQueue, or the part of a spec it is about.
type guideRoom struct {
	where string // file:line
	spec  map[string]any
}

// guideRooms are the rooms of the README and docs/guides: every YAML block that is a WaitingQueue or
// starts with "spec:".
func guideRooms() []guideRoom {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "guides", "*.md"))
	Expect(err).NotTo(HaveOccurred())
	files = append(files, filepath.Join(repoRoot, "README.md"))
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	var rooms []guideRoom
	for _, f := range files {
		raw, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range block.FindAllSubmatchIndex(raw, -1) {
			text := string(raw[m[2]:m[3]])
			if !strings.HasPrefix(text, "spec:") && !strings.Contains(text, "kind: WaitingQueue") {
				continue
			}
			where := fmt.Sprintf("%s:%d", filepath.Base(f), strings.Count(string(raw[:m[0]]), "\n")+1)
			doc := map[string]any{}
			Expect(yaml.Unmarshal([]byte(text), &doc)).To(Succeed(), where)
			s, ok := doc["spec"].(map[string]any)
			Expect(ok).To(BeTrue(), "%s: no spec", where)
			rooms = append(rooms, guideRoom{where: where, spec: s})
		}
	}
	return rooms
}

// mergeSpec lays part over spec: objects merge field by field, anything else (a list, a value, the
// upstream, whose two forms exclude each other) replaces what spec had.
func mergeSpec(spec, part map[string]any) {
	for k, v := range part {
		sub, isMap := v.(map[string]any)
		cur, hasMap := spec[k].(map[string]any)
		if isMap && hasMap && k != "upstream" {
			mergeSpec(cur, sub)
			continue
		}
		spec[k] = v
	}
}

// A guide's example is what a user copies: each must be a room the API server accepts and the proxy
// serves, laid over the test builder's room (which holds what the example leaves out).
var _ = Describe("The rooms the guides show", func() {
	It("are accepted by the API server and served by the proxy", func() {
		rooms := guideRooms()
		Expect(len(rooms)).To(BeNumerically(">=", 15), "the guides' rooms found")
		var broken []string
		for i, r := range rooms {
			obj := sampleObject(fmt.Sprintf("guide-%d", i))
			mergeSpec(spec(obj), jsonCopy(r.spec))
			stored, err := apiVerdict(obj)
			if err != nil {
				broken = append(broken, fmt.Sprintf("%s: the API server refuses it: %v", r.where, err))
				continue
			}
			wq, err := decode(stored)
			if err == nil {
				err = proxyVerdict(wq)
			}
			if err != nil {
				broken = append(broken, fmt.Sprintf("%s: the proxy does not serve it: %v", r.where, err))
			}
		}
		GinkgoWriter.Printf("guides: %d rooms\n", len(rooms))
		Expect(broken).To(BeEmpty(), "rooms the guides show that the product refuses:\n%s", strings.Join(broken, "\n"))
	})
})
