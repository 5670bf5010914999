package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/herdgate/herdgate/test/testenv"
)

// ownCPU is the CPU time a finished command used.
func ownCPU(cmd *exec.Cmd) time.Duration {
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// notProfiled is the wait of a run that takes no profile.
func notProfiled() error { return nil }

// cpuProfile starts fetching a CPU profile of the load about to start from the proxy's pprof
// endpoint, and returns a function that waits for it and writes it to path.
func cpuProfile(base, path string, d time.Duration) func() error {
	done := make(chan error, 1)
	go func() {
		seconds := max(1, int(d.Seconds())-1)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds))
		if err != nil {
			done <- fmt.Errorf("cpu profile: %w", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("cpu profile: %s", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() error {
		err := <-done
		if err == nil {
			fmt.Fprintf(os.Stderr, "[bench-proxy] CPU profile: %s\n", path)
		}
		return err
	}
}

// processCPU is the CPU time a process has used so far, 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	stat, _ := testenv.ReadProcStat(pid)
	return stat.CPU
}

// groupCPU is the CPU time used so far by the live processes of each process group, in the order
// given, from one pass over /proc.
func groupCPU(pgids ...int) []time.Duration {
	totals := make([]time.Duration, len(pgids))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, ok := testenv.ReadProcStat(pid)
		if !ok {
			continue
		}
		for i, pgid := range pgids {
			if stat.PGID == pgid {
				totals[i] += stat.CPU
			}
		}
	}
	return totals
}

func perRequest(cpu time.Duration, requests int64) time.Duration {
	if requests == 0 {
		return 0
	}
	return cpu / time.Duration(requests)
}
