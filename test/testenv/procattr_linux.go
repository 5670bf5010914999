package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a server this process started if the process ends without
// stopping it (a crashed or timed-out test), so no server outlives its test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
