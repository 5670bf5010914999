package testenv

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's CPU times: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// ProcStat is what /proc/<pid>/stat tells of a process: benchmarks read the CPU time of the servers
// they load, which depends less than a rate on what else the machine runs.
type ProcStat struct {
	// PGID is the process group.
	PGID int
	// CPU is the user and system time the process has used so far, its threads included.
	CPU time.Duration
}

// ReadProcStat reads a process's /proc/<pid>/stat (Linux only); false when the process is gone or
// there is no /proc.
func ReadProcStat(pid int) (ProcStat, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, false
	}
	// The command name comes second, in parentheses, and may hold spaces: fields are counted after
	// it, [0] being the state (field 3 of proc(5)).
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	if len(fields) < 13 {
		return ProcStat{}, false
	}
	pgid, err1 := strconv.Atoi(string(fields[2]))
	utime, err2 := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, err3 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return ProcStat{}, false
	}
	return ProcStat{PGID: pgid, CPU: time.Duration(utime+stime) * clockTick}, true
}
