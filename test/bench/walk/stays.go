package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// stays reads a debugger's trace of the walk binary's herdgate functions (dlv trace, which writes a
// line for every call, "> goroutine(N): f(args)", and every return, ">> goroutine(N): f => (…)") and
// writes how the poll between pollBegins and pollEnds went: the herdgate files it crossed, its calls,
// and its stays, each an unbroken run of calls and returns in one file, and how many of those were
// returns to a file the poll had already left.
func stays(binary, trace string, out io.Writer) error {
	files, err := filesOf(binary)
	if err != nil {
		return err
	}
	f, err := os.Open(trace)
	if err != nil {
		return err
	}
	defer f.Close()
	event := regexp.MustCompile(`^(>>?) goroutine\((\d+)\): (\S+)`)
	var (
		in, calls, runs, returns int
		last                     string
		left                     = map[string]bool{}
		seen                     = map[string]int{}
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := event.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		kind, goroutine, fn := m[1], m[2], functionOf(m[3])
		switch {
		case strings.HasPrefix(fn, "main.pollBegins"):
			in++
			continue
		case strings.HasPrefix(fn, "main.pollEnds"):
			in = 2
		}
		if in != 1 || goroutine == "1" {
			// Before or after the poll, or the client's own goroutine.
			continue
		}
		file, ok := files[fn]
		if !ok {
			continue
		}
		if kind == ">" {
			calls++
		}
		seen[file]++
		if file != last {
			runs++
			if left[file] {
				returns++
			}
			if last != "" {
				left[last] = true
			}
			last = file
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if in == 0 {
		return fmt.Errorf("%s holds no pollBegins: trace the functions matching (github.com/herdgate/herdgate/(admission|internal)|main\\.poll)", trace)
	}
	fmt.Fprintf(out, "%d files, %d calls, %d stays, %d of them returns to a file already left\n", len(seen), calls, runs, returns)
	for file, n := range seen {
		fmt.Fprintf(out, "%6d %s\n", n, file)
	}
	return nil
}

// functionOf is the function a trace line names, without its arguments: they begin at the first
// parenthesis that does not follow a dot, which would open a receiver, as in pkg.(*T).M.
func functionOf(s string) string {
	for i := 1; i < len(s); i++ {
		if s[i] == '(' && s[i-1] != '.' {
			return s[:i]
		}
	}
	return s
}

// filesOf maps each herdgate function of binary to its source file, relative to the module.
func filesOf(binary string) (map[string]string, error) {
	text, err := exec.Command("go", "tool", "objdump", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool objdump %s: %w", binary, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != "TEXT" || !strings.HasPrefix(fields[1], "github.com/herdgate/herdgate/") {
			continue
		}
		file := fields[2]
		if i := strings.LastIndex(file, "/admission/"); i >= 0 {
			file = file[i+1:]
		} else if i := strings.LastIndex(file, "/internal/"); i >= 0 {
			file = file[i+1:]
		} else {
			file = filepath.Base(file)
		}
		out[strings.TrimSuffix(fields[1], "(SB)")] = file
	}
	return out, nil
}
