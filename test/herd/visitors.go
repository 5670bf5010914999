package herd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Scenario is one of the reference post's k6 tests: Visitors virtual visitors start at once; each
// enters the waiting room, polls as the proxy tells it, then places one order with its pass.
type Scenario struct {
	Name     string
	Visitors int
	// Target is the admission proxy's base URL.
	Target string
	// OrderPath is the protected route the order goes to.
	OrderPath string
	// GiveUp bounds one visitor's whole visit.
	GiveUp time.Duration
}

// Results are what the visitors measured, the k6 metrics of the reference post.
type Results struct {
	Scenario string
	Visitors int
	// RequestP95 is the 95th percentile of every HTTP request's duration (k6 http_req_duration).
	RequestP95 time.Duration
	// PassWaitP95 is the 95th percentile of the time from entering to holding a valid pass.
	PassWaitP95 time.Duration
	// OrderP95 is the 95th percentile of the order request's duration.
	OrderP95 time.Duration
	// OrdersOK counts orders the service accepted; Failed counts visitors who got no order through.
	OrdersOK, Failed int
	// IterationMean is the mean time of one whole visit.
	IterationMean time.Duration
	// Polls counts status polls; TooEarly those refused with 429.
	Polls, TooEarly int
	// Busy counts orders a gateway's cap on the workload refused (503 workload_busy), each tried
	// again after its Retry-After with the same pass; OrderP95 includes those waits.
	Busy int
	// Errors holds the first few failure reasons.
	Errors []string
}

// SuccessRate is the share of visitors whose order went through, in percent.
func (r Results) SuccessRate() float64 {
	if r.Visitors == 0 {
		return 0
	}
	return 100 * float64(r.OrdersOK) / float64(r.Visitors)
}

type visit struct {
	requests        []time.Duration
	passWait, order time.Duration
	iteration       time.Duration
	ok              bool
	polls, tooEarly int
	busy            int
	err             string
}

// Run lets the scenario's visitors loose and waits until every visit ended.
func Run(ctx context.Context, sc Scenario) Results {
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        sc.Visitors * 2,
		MaxIdleConnsPerHost: sc.Visitors * 2,
		IdleConnTimeout:     30 * time.Second,
	}
	defer transport.CloseIdleConnections()
	visits := make([]visit, sc.Visitors)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range visits {
		wg.Go(func() {
			<-start
			visits[i] = oneVisit(ctx, sc, transport)
		})
	}
	close(start)
	wg.Wait()

	res := Results{Scenario: sc.Name, Visitors: sc.Visitors}
	var all, waits, orders []time.Duration
	var iterations time.Duration
	for _, v := range visits {
		all = append(all, v.requests...)
		res.Polls += v.polls
		res.TooEarly += v.tooEarly
		res.Busy += v.busy
		iterations += v.iteration
		if v.ok {
			res.OrdersOK++
			waits = append(waits, v.passWait)
			orders = append(orders, v.order)
		} else {
			res.Failed++
			if len(res.Errors) < 5 && v.err != "" && !slices.Contains(res.Errors, v.err) {
				res.Errors = append(res.Errors, v.err)
			}
		}
	}
	for _, d := range [][]time.Duration{all, waits, orders} {
		slices.Sort(d)
	}
	res.RequestP95, res.PassWaitP95, res.OrderP95 = p95(all), p95(waits), p95(orders)
	if sc.Visitors > 0 {
		res.IterationMean = iterations / time.Duration(sc.Visitors)
	}
	return res
}

// answer is the proxy's enter/status body, and the fields of its errors a visitor needs.
type answer struct {
	Admitted     bool   `json:"admitted"`
	Pass         string `json:"pass"`
	NextPollMs   int64  `json:"nextPollMs"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Error        string `json:"error"`
}

// busyRetries is how many times a visitor orders again after the workload's cap refused it: for
// a minute, as the busy page reloads every second.
const busyRetries = 60

func oneVisit(ctx context.Context, sc Scenario, transport http.RoundTripper) (v visit) {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Transport: transport, Jar: jar, Timeout: 60 * time.Second}
	began := time.Now()
	defer func() { v.iteration = time.Since(began) }()
	ctx, cancel := context.WithTimeout(ctx, sc.GiveUp)
	defer cancel()

	call := func(method, path, pass string) (int, answer, http.Header, error) {
		req, err := http.NewRequestWithContext(ctx, method, sc.Target+path, nil)
		if err != nil {
			return 0, answer{}, nil, err
		}
		if pass != "" {
			req.Header.Set("X-Herdgate-Pass", pass)
			req.Header.Set("Content-Type", "application/json")
			req.Body = io.NopCloser(strings.NewReader(`{"item":1}`))
		}
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, answer{}, nil, err
		}
		defer res.Body.Close()
		a := answer{}
		body, _ := io.ReadAll(res.Body)
		v.requests = append(v.requests, time.Since(t0))
		_ = json.Unmarshal(body, &a)
		return res.StatusCode, a, res.Header, nil
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}

	code, a, h, err := call(http.MethodPost, "/.herdgate/enter", "")
	for {
		if err != nil {
			v.err = err.Error()
			return v
		}
		switch {
		case code == http.StatusOK && a.Admitted:
			v.passWait = time.Since(began)
			t0 := time.Now()
			var refusal answer
			code, refusal, h, err = call(http.MethodPost, sc.OrderPath, a.Pass)
			// A refusal of the gateway's cap on the workload: the pass stays valid, order again
			// after the moment told (retryAfterMs, else Retry-After), as the busy page does.
			for tries := 0; err == nil && code == http.StatusServiceUnavailable && refusal.Error == "workload_busy" && tries < busyRetries; tries++ {
				v.busy++
				wait := time.Duration(refusal.RetryAfterMs) * time.Millisecond
				if wait <= 0 {
					s, _ := strconv.Atoi(h.Get("Retry-After"))
					wait = time.Duration(max(1, s)) * time.Second
				}
				if !sleep(wait) {
					break
				}
				code, refusal, h, err = call(http.MethodPost, sc.OrderPath, a.Pass)
			}
			v.order = time.Since(t0)
			switch {
			case err != nil:
				v.err = err.Error()
			case code != http.StatusOK:
				v.err = fmt.Sprintf("order answered %d %s", code, refusal.Error)
			default:
				v.ok = true
			}
			return v
		case code == http.StatusOK:
			if !sleep(time.Duration(a.NextPollMs) * time.Millisecond) {
				v.err = "gave up waiting"
				return v
			}
		case code == http.StatusTooManyRequests:
			v.tooEarly++
			if !sleep(time.Duration(a.RetryAfterMs) * time.Millisecond) {
				v.err = "gave up waiting"
				return v
			}
		case code == http.StatusNotFound:
			code, a, h, err = call(http.MethodPost, "/.herdgate/enter", "")
			continue
		case code == http.StatusServiceUnavailable:
			s, _ := strconv.Atoi(h.Get("Retry-After"))
			if !sleep(time.Duration(max(1, s)) * time.Second) {
				v.err = "gave up waiting"
				return v
			}
		default:
			v.err = fmt.Sprintf("waiting room answered %d", code)
			return v
		}
		v.polls++
		code, a, h, err = call(http.MethodGet, "/.herdgate/status", "")
	}
}
