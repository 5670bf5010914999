//go:build !linux

package testenv

import "os/exec"

// dieWithParent: only Linux can tie a child's life to its parent's; elsewhere tests stop their
// servers in Cleanup, as they do on Linux too.
func dieWithParent(*exec.Cmd) {}
