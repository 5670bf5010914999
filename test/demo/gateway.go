package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/test/herd"
	"github.com/herdgate/herdgate/test/testenv"
)

// gateways are the gateways --gateway puts in front of the room, configured as
// docs/guides/gateways.md says.
var gateways = []string{"nginx", "traefik"}

// startGateway starts the gateway kind on a free loopback port in dir, asking herdgate at herdgate
// and forwarding to the workload at workload (host:port each), and returns its URL once it answers
// for herdgate's own paths.
func startGateway(ctx context.Context, kind, dir, herdgate, workload string) (string, func(), error) {
	port, err := testenv.FreePort()
	if err != nil {
		return "", nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	g, err := testenv.StartGuideGateway(kind, filepath.Join(dir, kind), listen, herdgate, workload)
	if err != nil {
		return "", nil, err
	}
	url := "http://" + listen
	if err := waitFor(ctx, kind+" to answer for herdgate", func() bool {
		res, err := http.Get(url + "/.herdgate/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}); err != nil {
		g.Stop()
		return "", nil, fmt.Errorf("%w (log: %s)", err, g.Log)
	}
	return url, g.Stop, nil
}

// probes are orders sent without a pass through the gateway while the herd runs: each that reaches
// the workload is an unprotected hit.
type probes struct {
	sent, through atomic.Int64
}

// run sends a probe every 20 ms until ctx ends, and at most max.
func (p *probes) run(ctx context.Context, target string, max int) {
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for range max {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target+"/api/v1/orders", nil)
		req.Header.Set("X-User-Id", fmt.Sprintf("probe-%d", p.sent.Load()))
		res, err := client.Do(req)
		if err != nil {
			continue
		}
		res.Body.Close()
		p.sent.Add(1)
		if res.StatusCode < 300 {
			p.through.Add(1)
		}
	}
}

// gatewaySummary says what the gateway's room did against its plan: the rate orders reached the
// workload at (each admitted visitor orders once, as soon as its pass is good), the peak of orders
// in flight against the pool, and the orders that reached the workload without an admission.
func gatewaySummary(kind string, plan float64, results herd.Results, stats herd.BackendStats, p *probes) error {
	arrivals := slices.Clone(stats.Arrivals)
	slices.Sort(arrivals)
	rate := 0.0
	if n := len(arrivals); n >= 20 {
		// The middle 80 %: the first and last orders of a herd come as its edges do, not as the plan.
		lo, hi := n/10, n-1-n/10
		rate = float64(hi-lo) / (arrivals[hi] - arrivals[lo]).Seconds()
	}
	// An order the workload took beyond the herd's own came without an admission; a probe that got
	// through is one too, whether the workload took it or not.
	unprotected := max(int64(stats.Orders-results.OrdersOK), p.through.Load())
	say("Through %s: admissions reached the workload at %.1f/s against a plan of %g/s", kind, rate, plan)
	say("Through %s: at most %d orders in flight at the workload, against a pool of %d; %d orders refused busy by its cap and sent again",
		kind, stats.PeakInFlight, stats.Pool, results.Busy)
	say("Through %s: %d unprotected hits (%d orders sent without a pass; the workload took %d orders, %d from admitted visitors)",
		kind, unprotected, p.sent.Load(), stats.Orders, results.OrdersOK)
	if unprotected > 0 {
		return fmt.Errorf("%d requests reached the workload through %s without an admission", unprotected, kind)
	}
	return nil
}
