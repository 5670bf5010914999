// Command ociimage writes a one-layer OCI image archive from files on this machine, without a container
// engine: the layer is a tar of the image's root filesystem, and the archive holds the layer, the image
// config, the manifest, index.json and oci-layout, as `ctr images import` and `skopeo copy oci-archive:`
// read them. Entries are sorted and their times fixed, so the same inputs give the same digests.
//
// It builds the images that the node of hack/node.sh imports (herdgate, the pause image, the evaluation
// Redis, the test workload); the Dockerfile stays the way to build herdgate's image with an engine.
//
//	ociimage -o herdgate.tar -name ghcr.io/herdgate/herdgate:0.1.0 \
//	  -add /manager=bin/manager -add /herdgate-proxy=bin/herdgate-proxy \
//	  -nonroot -ca-bundle /etc/ssl/certs/ca-certificates.crt -user 65532:65532 -entrypoint /manager
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

type options struct {
	out        string
	name       string
	adds       repeated
	dirs       repeated
	env        repeated
	entrypoint string
	cmd        string
	user       string
	workdir    string
	nonroot    bool
	caBundle   string
	withLibs   bool
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	fs.StringVar(&o.out, "o", "", "the archive to write (required)")
	fs.StringVar(&o.name, "name", "", "the image's full name, e.g. docker.io/library/pause:3.10 (required)")
	fs.Var(&o.adds, "add", "`dst=src`: put the file src at dst in the image (repeatable)")
	fs.Var(&o.dirs, "dir", "`path[:mode]`: an empty directory, mode in octal (default 0755; repeatable)")
	fs.Var(&o.env, "env", "`NAME=value` in the image's environment (repeatable)")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "the entrypoint, words separated by spaces")
	fs.StringVar(&o.cmd, "cmd", "", "the default arguments, words separated by spaces")
	fs.StringVar(&o.user, "user", "", "the user the container runs as, uid[:gid]")
	fs.StringVar(&o.workdir, "workdir", "", "the working directory")
	fs.BoolVar(&o.nonroot, "nonroot", false, "add /etc/passwd and /etc/group with root and nonroot (65532), and /home/nonroot")
	fs.StringVar(&o.caBundle, "ca-bundle", "", "a CA bundle to install as /etc/ssl/certs/ca-certificates.crt")
	fs.BoolVar(&o.withLibs, "with-libs", false, "also add the shared libraries and loader that dynamically linked files need (from ldd)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.out == "" {
		return errors.New("flag -o: the archive to write is required")
	}
	if o.name == "" || !strings.Contains(o.name, ":") {
		return fmt.Errorf("flag -name: %q must be a full image name with a tag", o.name)
	}
	layer, err := buildLayer(o)
	if err != nil {
		return err
	}
	archive, err := buildArchive(o, layer)
	if err != nil {
		return err
	}
	tmp := o.out + ".partial"
	if err := os.WriteFile(tmp, archive, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, o.out)
}

// fixedTime is every entry's modification time, so that rebuilding the same files gives the same digest.
var fixedTime = time.Unix(0, 0).UTC()

type entry struct {
	name     string // path in the image, without the leading slash
	mode     int64
	dir      bool
	content  []byte
	uid, gid int
}

// buildLayer returns the tar of the image's root filesystem.
func buildLayer(o options) ([]byte, error) {
	entries := map[string]entry{}
	addDir := func(p string, mode int64) {
		for d := strings.Trim(p, "/"); d != "." && d != ""; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = entry{name: d, mode: 0o755, dir: true}
			}
		}
		if d := strings.Trim(p, "/"); d != "" {
			e := entries[d]
			e.mode = mode
			entries[d] = e
		}
	}
	addFile := func(p string, content []byte, mode int64) {
		p = strings.TrimPrefix(path.Clean(p), "/")
		if dir := path.Dir(p); dir != "." {
			addDir(dir, 0o755)
		}
		entries[p] = entry{name: p, mode: mode, content: content}
	}

	var needLibs []string
	for _, a := range o.adds {
		dst, src, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(dst, "/") || src == "" {
			return nil, fmt.Errorf("flag -add: %q must be /path/in/image=file", a)
		}
		content, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("flag -add %s: %w", a, err)
		}
		info, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		mode := int64(info.Mode().Perm())
		if mode&0o111 != 0 {
			mode = 0o755
		} else {
			mode = 0o644
		}
		addFile(dst, content, mode)
		if o.withLibs && isDynamicELF(src) {
			needLibs = append(needLibs, src)
		}
	}
	if o.withLibs {
		libs, err := sharedLibraries(needLibs)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			content, err := os.ReadFile(lib)
			if err != nil {
				return nil, fmt.Errorf("flag -with-libs: %w", err)
			}
			addFile(lib, content, 0o755)
		}
	}
	for _, d := range o.dirs {
		p, modeText, hasMode := strings.Cut(d, ":")
		mode := int64(0o755)
		if hasMode {
			if _, err := fmt.Sscanf(modeText, "%o", &mode); err != nil {
				return nil, fmt.Errorf("flag -dir: %q: the mode must be octal", d)
			}
		}
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("flag -dir: %q must be an absolute path", d)
		}
		addDir(p, mode)
	}
	if o.nonroot {
		addFile("/etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644)
		addFile("/etc/group", []byte("root:x:0:\nnonroot:x:65532:\n"), 0o644)
		addDir("/home/nonroot", 0o700)
		e := entries["home/nonroot"]
		e.uid, e.gid = 65532, 65532
		entries["home/nonroot"] = e
	}
	if o.caBundle != "" {
		content, err := os.ReadFile(o.caBundle)
		if err != nil {
			return nil, fmt.Errorf("flag -ca-bundle: %w", err)
		}
		addFile("/etc/ssl/certs/ca-certificates.crt", content, 0o644)
	}
	addDir("/tmp", 0o1777)

	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := entries[n]
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: fixedTime, Uid: e.uid, Gid: e.gid, Format: tar.FormatPAX}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.content); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func isDynamicELF(file string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

var lddPath = regexp.MustCompile(`(/[^\s]+)\s+\(0x`)

// sharedLibraries lists, by absolute path, every library and loader that ldd says the files need.
func sharedLibraries(files []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range files {
		out, err := exec.Command("ldd", f).Output()
		if err != nil {
			return nil, fmt.Errorf("flag -with-libs: ldd %s: %w", f, err)
		}
		for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
			lib, err := filepath.EvalSymlinks(m[1])
			if err != nil {
				return nil, err
			}
			// The loader and libraries are looked up by the names ldd printed, which may be links.
			seen[m[1]] = true
			seen[lib] = true
		}
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func words(s string) []string { return strings.Fields(s) }

// buildArchive wraps the layer in an OCI image layout and tars it.
func buildArchive(o options, layer []byte) ([]byte, error) {
	config := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      fixedTime.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": words(o.entrypoint),
			"Cmd":        words(o.cmd),
			"User":       o.user,
			"WorkingDir": o.workdir,
			"Env":        append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, o.env...),
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer)}},
		"history": []map[string]string{{"created": fixedTime.Format(time.RFC3339), "created_by": "ociimage"}},
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digestOf(configJSON), Size: int64(len(configJSON))},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digestOf(layer), Size: int64(len(layer))}},
	}
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	tag := o.name[strings.LastIndex(o.name, ":")+1:]
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json",
			Digest:    digestOf(manifestJSON),
			Size:      int64(len(manifestJSON)),
			Platform:  &platform{Architecture: runtime.GOARCH, OS: "linux"},
			// containerd names the imported image by the first; other tools read the tag from the second.
			Annotations: map[string]string{"io.containerd.image.name": o.name, "org.opencontainers.image.ref.name": tag},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write := func(name string, content []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: fixedTime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, bytes.NewReader(content))
		return err
	}
	blob := func(b []byte) error { return write("blobs/sha256/"+strings.TrimPrefix(digestOf(b), "sha256:"), b) }
	for _, step := range []func() error{
		func() error { return write("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)) },
		func() error { return write("index.json", indexJSON) },
		func() error { return blob(configJSON) },
		func() error { return blob(manifestJSON) },
		func() error { return blob(layer) },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
