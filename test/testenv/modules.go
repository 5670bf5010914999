package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ModuleFile is the path of a file inside a Go module's source at a version, downloaded into the
// module cache when it is not there yet: how tests read other projects' CRDs without vendoring them.
func ModuleFile(module, version, path string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); err == nil && jsonErr != nil {
		err = jsonErr
	}
	if err != nil {
		return "", fmt.Errorf("downloading %s@%s: %w %s", module, version, err, info.Error)
	}
	if info.Error != "" {
		return "", fmt.Errorf("downloading %s@%s: %s", module, version, info.Error)
	}
	file := filepath.Join(info.Dir, filepath.FromSlash(path))
	if _, err := os.Stat(file); err != nil {
		return "", fmt.Errorf("%s@%s has no %s: %w", module, version, path, err)
	}
	return file, nil
}
