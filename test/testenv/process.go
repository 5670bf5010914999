package testenv

import (
	"os/exec"
	"syscall"
	"time"
)

// Process is a server a test started, in a process group of its own, so that its workers go with it:
// killed alone, a master (nginx's) leaves its workers running, holding their ports.
type Process struct {
	cmd *exec.Cmd
}

// startProcess starts cmd in a process group of its own.
func startProcess(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Process{cmd: cmd}, nil
}

// PGID is the process group of the server and its workers.
func (p *Process) PGID() int { return p.cmd.Process.Pid }

// Stop asks the server's group to stop (SIGTERM), and kills it after 5 s.
func (p *Process) Stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
