//go:build linux

package testenv

import (
	"crypto/sha256"
	"os"
	"syscall"
	"testing"
)

func TestReadProcStatOfThisProcess(t *testing.T) {
	before, ok := ReadProcStat(os.Getpid())
	if !ok {
		t.Fatal("cannot read this process's /proc stat")
	}
	if want := syscall.Getpgrp(); before.PGID != want {
		t.Errorf("PGID = %d, want %d", before.PGID, want)
	}
	// Compute until the kernel's accounting (in 10 ms ticks) shows it: a few ms of hashing per round,
	// seconds of CPU in all before giving up.
	sum := sha256.Sum256(nil)
	for range 5_000 {
		for range 10_000 {
			sum = sha256.Sum256(sum[:])
		}
		after, ok := ReadProcStat(os.Getpid())
		if !ok {
			t.Fatal("cannot read this process's /proc stat")
		}
		if after.CPU > before.CPU {
			return
		}
	}
	t.Fatalf("CPU time stayed at %v while this process kept computing", before.CPU)
}

func TestReadProcStatOfNoProcess(t *testing.T) {
	// Process ids never reach this value on Linux (pid_max is at most 2^22).
	if _, ok := ReadProcStat(1 << 30); ok {
		t.Error("ReadProcStat of a process that does not exist reported one")
	}
}
