package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"
)

type wrkResult struct {
	rps      float64
	requests int64
	p50, p99 time.Duration
	non2xx   int
	// proxyCPU, backendCPU and redisCPU are the CPU time the proxy under test (herdgate-proxy or
	// nginx), the backend and Redis spent during the run, when measured; loadCPU is the load
	// generator's own (wrk or redis-benchmark).
	proxyCPU, backendCPU, redisCPU, loadCPU time.Duration
	// gatewayCPU and checkCPU split proxyCPU of nginx asking herdgate's check: nginx's own, and
	// herdgate-proxy's answering the checks.
	gatewayCPU, checkCPU time.Duration
	// answers counts the responses by kind, when the script tells them ("answers <kind>: <n>").
	answers map[string]int64
}

func wrk(url, script string, conns int, d time.Duration) (wrkResult, error) {
	cmd := exec.Command("wrk", "-t"+strconv.Itoa(wrkThreads), "-c"+strconv.Itoa(conns), "-d"+d.String(), "--latency", "-s", script, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	r, err := parseWrk(string(out))
	r.loadCPU = ownCPU(cmd)
	return r, err
}

func parseWrk(out string) (wrkResult, error) {
	r := wrkResult{}
	m := rpsLine.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m := requestsLine.FindStringSubmatch(out); m != nil {
		r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	for _, l := range latencyLine.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(l[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[l[3]]
		dur := time.Duration(v * float64(unit))
		if l[1] == "50" {
			r.p50 = dur
		} else {
			r.p99 = dur
		}
	}
	if m := non2xxLine.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(m[1])
	}
	for _, m := range answersLine.FindAllStringSubmatch(out, -1) {
		if r.answers == nil {
			r.answers = map[string]int64{}
		}
		r.answers[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	return r, nil
}

// fixedRate sends request on conns keep-alive connections at a constant rate (open loop) and
// measures latency from each request's scheduled time, so a slow response delays no measurement
// (no coordinated omission). It speaks HTTP/1.1 on raw connections: a lean client keeps its own
// cost and jitter out of the numbers on a machine it shares with what it measures.
func fixedRate(addr, request string, rate float64, conns int, d time.Duration) (wrkResult, error) {
	total := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	jobs := make(chan time.Time, total)
	lat := make([]time.Duration, 0, total)
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	for range conns {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return wrkResult{}, err
		}
		wg.Go(func() {
			defer conn.Close()
			br := bufio.NewReader(conn)
			mine := make([]time.Duration, 0, total/conns+1)
			var err error
			for scheduled := range jobs {
				if err != nil {
					continue // drain
				}
				if wait := time.Until(scheduled); wait > 0 {
					time.Sleep(wait)
				}
				if _, err = io.WriteString(conn, request); err != nil {
					continue
				}
				var res *http.Response
				if res, err = http.ReadResponse(br, nil); err != nil {
					continue
				}
				_, err = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err == nil && res.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", res.StatusCode)
				}
				mine = append(mine, time.Since(scheduled))
			}
			mu.Lock()
			if err != nil && failed == nil {
				failed = err
			}
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	start := time.Now().Add(100 * time.Millisecond)
	for i := range total {
		jobs <- start.Add(time.Duration(i) * interval)
	}
	close(jobs)
	wg.Wait()
	if failed != nil {
		return wrkResult{}, failed
	}
	slices.Sort(lat)
	return wrkResult{rps: rate, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}, nil
}

// medianBy is the run with the median key.
func medianBy(runs []wrkResult, key func(wrkResult) float64) wrkResult {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b wrkResult) int { return cmp.Compare(key(a), key(b)) })
	return sorted[len(sorted)/2]
}
