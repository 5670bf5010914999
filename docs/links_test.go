// Package docs holds herdgate's documentation; its test checks that every link in it, and every
// reference to it from the code, leads somewhere.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// skipped are folders of the tree that hold no documentation of herdgate's.
var skipped = []string{".git", "bin", "_artifacts", "node_modules", "vendor"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod above docs/: %v", err)
	}
	return root
}

// files are the tree's files whose name ends in one of exts, relative to root.
func files(t *testing.T, root string, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && slices.Contains(skipped, d.Name()) {
			return filepath.SkipDir
		}
		for _, ext := range exts {
			if !d.IsDir() && strings.HasSuffix(path, ext) {
				rel, _ := filepath.Rel(root, path)
				out = append(out, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	fence      = regexp.MustCompile("(?ms)^```.*?^```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
)

// prose is a Markdown text without its code, where links are not links.
func prose(text string) string {
	return inlineCode.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
}

// anchors are the anchors GitHub gives the headings of a Markdown text.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		slug := slugOf(m[1])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugOf is a heading's anchor as GitHub makes it: lower case, markup and punctuation dropped,
// spaces made hyphens.
func slugOf(h string) string {
	h = strings.NewReplacer("`", "", "*", "", "[", "", "]", "").Replace(h)
	if i := strings.Index(h, "]("); i >= 0 {
		h = h[:i]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestEveryLinkLeadsSomewhere: every relative link of every Markdown file names a file of the tree,
// and every anchor a heading of its file.
func TestEveryLinkLeadsSomewhere(t *testing.T) {
	root := repoRoot(t)
	docs := files(t, root, ".md")
	if len(docs) < 10 {
		t.Fatalf("found %d Markdown files: %v", len(docs), docs)
	}
	texts := map[string]string{}
	read := func(rel string) (string, bool) {
		if text, ok := texts[rel]; ok {
			return text, true
		}
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", false
		}
		texts[rel] = string(raw)
		return texts[rel], true
	}
	checked := 0
	for _, doc := range docs {
		text, _ := read(doc)
		for _, m := range link.FindAllStringSubmatch(prose(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			rel := doc
			if path != "" {
				rel = filepath.Clean(filepath.Join(filepath.Dir(doc), path))
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
					t.Errorf("%s: link %s: no %s in the tree", doc, target, rel)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			linked, ok := read(rel)
			if !ok || !strings.HasSuffix(rel, ".md") {
				t.Errorf("%s: link %s: an anchor into %s, which is not a Markdown file", doc, target, rel)
				continue
			}
			if !anchors(linked)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with anchor %q", doc, target, rel, anchor)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d links; the link pattern no longer finds them", checked)
	}
}

// docReference is a document the code names, with the section it points to when it quotes one, as
// in: see docs/architecture.md, "The proxy".
var docReference = regexp.MustCompile(`((?:docs/[\w./-]+|CONTRIBUTING|README)\.md)(?:,? \(?"([^"]+)")?`)

// TestTheCodeNamesDocsThatExist: a document a code comment sends the reader to exists, and so does
// the section it names.
func TestTheCodeNamesDocsThatExist(t *testing.T) {
	root := repoRoot(t)
	found := 0
	for _, src := range files(t, root, ".go", ".sh", ".yaml", "Makefile") {
		raw, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docReference.FindAllStringSubmatch(string(raw), -1) {
			found++
			doc, err := os.ReadFile(filepath.Join(root, m[1]))
			if err != nil {
				t.Errorf("%s names %s, which does not exist", src, m[1])
				continue
			}
			if section := m[2]; section != "" && !strings.Contains(string(doc), section) {
				t.Errorf("%s names the section %q of %s, which has none", src, section, m[1])
			}
		}
	}
	if found < 5 {
		t.Fatalf("found %d references to the docs in the code; the pattern no longer finds them", found)
	}
}

var metricName = regexp.MustCompile(`Name:\s*"(herdgate_[a-z_]+)"`)

// TestTheMetricsReferenceListsEveryMetric: docs/reference/metrics.md names every metric the code
// registers, and none it does not.
func TestTheMetricsReferenceListsEveryMetric(t *testing.T) {
	root := repoRoot(t)
	registered := map[string]bool{}
	for _, src := range files(t, root, ".go") {
		if strings.HasSuffix(src, "_test.go") || strings.HasPrefix(src, "test/") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricName.FindAllStringSubmatch(string(raw), -1) {
			registered[m[1]] = true
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(herdgate_[a-z_]+)`").FindAllStringSubmatch(string(raw), -1) {
		listed[m[1]] = true
	}
	if len(registered) < 20 {
		t.Fatalf("found %d metrics in the code; the pattern no longer finds them", len(registered))
	}
	for name := range registered {
		if !listed[name] {
			t.Errorf("%s is registered but not in docs/reference/metrics.md", name)
		}
	}
	for name := range listed {
		if !registered[name] {
			t.Errorf("docs/reference/metrics.md lists %s, which no code registers", name)
		}
	}
}
