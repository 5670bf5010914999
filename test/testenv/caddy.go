package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Caddy is a Caddy (Debian's) serving the Caddyfile a test gives it, its state in a folder of its own.
type Caddy struct{ *Process }

// StartCaddy runs caddy with caddyfile, its files in dir. The file's global options should turn off
// the admin endpoint and automatic HTTPS: tests listen on loopback ports only.
func StartCaddy(dir, caddyfile string) (*Caddy, error) {
	if _, err := exec.LookPath("caddy"); err != nil {
		return nil, fmt.Errorf("caddy not found; run 'make toolchain' (Debian package caddy): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("caddy", "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	cmd.Stderr, _ = os.Create(filepath.Join(dir, "caddy.log"))
	p, err := startProcess(cmd)
	if err != nil {
		return nil, err
	}
	return &Caddy{p}, nil
}
