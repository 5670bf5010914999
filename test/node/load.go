package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Herd is a steady stream of visitors through the proxy's Service: each enters, polls as told,
// and once admitted sends Orders protected requests with its pass. It counts what a drill reports.
type Herd struct {
	// Target is the proxy's base URL; OrderPath the protected route.
	Target, OrderPath string
	// PerSecond visitors arrive, evenly spaced.
	PerSecond int
	// Orders is how many protected requests an admitted visitor sends, OrderGap apart.
	Orders   int
	OrderGap time.Duration

	client  *http.Client
	wg      sync.WaitGroup
	stop    chan struct{}
	began   time.Time
	stopped sync.Once

	mu       sync.Mutex
	visitors []*visitor

	// Counters of answers, for the report.
	unavailable, unavailableNoRetry, transportErrors, placesLost atomic.Int64
	// calls and held count the enter and status calls, and those answered a second or more after
	// they were sent.
	calls, held atomic.Int64
	mu2         sync.Mutex
	failures    []string
}

type visitor struct {
	entered, admitted bool
	admittedAt        time.Time
	ordersOK          int
	ordersBad         int
}

// Start lets the herd loose until Stop.
func (h *Herd) Start(ctx context.Context) {
	h.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	h.stop = make(chan struct{})
	h.began = time.Now()
	gap := time.Second / time.Duration(max(1, h.PerSecond))
	h.wg.Go(func() {
		t := time.NewTicker(gap)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.stop:
				return
			case <-t.C:
				v := &visitor{}
				h.mu.Lock()
				h.visitors = append(h.visitors, v)
				h.mu.Unlock()
				h.wg.Go(func() { h.visit(ctx, v) })
			}
		}
	})
}

// Stop ends the arrivals and waits until every visitor is through or ctx ends.
func (h *Herd) Stop() {
	h.stopped.Do(func() { close(h.stop) })
	h.wg.Wait()
	h.client.CloseIdleConnections()
}

func (h *Herd) fail(format string, a ...any) {
	h.mu2.Lock()
	defer h.mu2.Unlock()
	if len(h.failures) < 8 {
		// When, in the herd's time, so that a failure can be set against the drill's fault.
		h.failures = append(h.failures, fmt.Sprintf("at %s: ", time.Since(h.began).Round(10*time.Millisecond))+fmt.Sprintf(format, a...))
	}
}

type answer struct {
	Admitted     bool   `json:"admitted"`
	Pass         string `json:"pass"`
	NextPollMs   int64  `json:"nextPollMs"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Error        string `json:"error"`
}

func (h *Herd) call(ctx context.Context, jar http.CookieJar, method, path, pass string) (int, answer, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.Target+path, nil)
	if err != nil {
		return 0, answer{}, nil, err
	}
	for _, c := range jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	if pass != "" {
		req.Header.Set("X-Herdgate-Pass", pass)
		req.Header.Set("Content-Type", "application/json")
		req.Body = io.NopCloser(strings.NewReader(`{"item":1}`))
	}
	res, err := h.client.Do(req)
	if err != nil {
		return 0, answer{}, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	jar.SetCookies(req.URL, res.Cookies())
	body, _ := io.ReadAll(res.Body)
	a := answer{}
	_ = json.Unmarshal(body, &a)
	return res.StatusCode, a, res.Header, nil
}

func (h *Herd) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// visit plays one visitor until it sent its orders or ctx ends.
func (h *Herd) visit(ctx context.Context, v *visitor) {
	jar, _ := cookiejar.New(nil)
	path, method := "/.herdgate/enter", http.MethodPost
	for ctx.Err() == nil {
		sent := time.Now()
		code, a, header, err := h.call(ctx, jar, method, path, "")
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.transportErrors.Add(1)
			h.fail("%s %s: %v", method, path, err)
			h.sleep(ctx, 200*time.Millisecond)
			continue
		}
		h.calls.Add(1)
		if time.Since(sent) >= time.Second {
			h.held.Add(1)
		}
		wait := time.Duration(0)
		switch {
		case code == http.StatusOK && a.Admitted:
			h.mu.Lock()
			v.entered, v.admitted, v.admittedAt = true, true, time.Now()
			h.mu.Unlock()
			h.order(ctx, jar, v, a.Pass)
			return
		case code == http.StatusOK:
			if method == http.MethodPost {
				h.mu.Lock()
				v.entered = true
				h.mu.Unlock()
			}
			path, method = "/.herdgate/status", http.MethodGet
			wait = time.Duration(max(a.NextPollMs, 50)) * time.Millisecond
		case code == http.StatusNotFound && method == http.MethodGet:
			// The queue does not know this visitor any more: its place is gone; it enters again.
			h.placesLost.Add(1)
			path, method = "/.herdgate/enter", http.MethodPost
		case code == http.StatusServiceUnavailable:
			h.unavailable.Add(1)
			s, err := strconv.Atoi(header.Get("Retry-After"))
			if err != nil || s <= 0 {
				h.unavailableNoRetry.Add(1)
				h.fail("%s %s: 503 without Retry-After (%s)", method, path, a.Error)
				s = 1
			}
			wait = time.Duration(s) * time.Second
		case code == http.StatusTooManyRequests:
			wait = time.Duration(max(a.RetryAfterMs, 50)) * time.Millisecond
		default:
			h.fail("%s %s: %d %s", method, path, code, a.Error)
			wait = 500 * time.Millisecond
		}
		if !h.sleep(ctx, wait) {
			return
		}
	}
}

func (h *Herd) order(ctx context.Context, jar http.CookieJar, v *visitor, pass string) {
	for i := range h.Orders {
		if i > 0 && !h.sleep(ctx, h.OrderGap) {
			return
		}
		code, a, _, err := h.call(ctx, jar, http.MethodPost, h.OrderPath, pass)
		h.mu.Lock()
		if err == nil && code == http.StatusOK {
			v.ordersOK++
		} else {
			v.ordersBad++
		}
		h.mu.Unlock()
		if err != nil {
			h.fail("order: %v", err)
		} else if code != http.StatusOK {
			h.fail("order: %d %s", code, a.Error)
		}
	}
}

// Counts are what a drill reports.
type Counts struct {
	Entered, Admitted int
	// Lost entered and were never admitted (the herd does not abandon: a visitor polls until ctx ends).
	Lost int
	// AdmittedTwice counts admissions the engine made beyond the visitors the herd saw admitted.
	AdmittedTwice int
	// OrdersOK and OrdersFailed count the protected requests of admitted visitors.
	OrdersOK, OrdersFailed int
	// Unavailable counts 503 answers to enter and status; UnavailableNoRetryAfter those without
	// Retry-After; TransportErrors failed connections; PlacesLost status answers that forgot a visitor.
	Unavailable, UnavailableNoRetryAfter, TransportErrors, PlacesLost int64
	// Calls counts the enter and status calls answered, Held those answered a second or more after
	// they were sent: a visitor kept waiting, as on a Redis that does not answer.
	Calls, Held int64
	Failures    []string
}

// Counts tallies the visitors; engineAdmitted is what the engine admitted over the visitors admitted
// from admittedAfter on.
func (h *Herd) Counts(engineAdmitted int64, admittedAfter time.Time) Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := Counts{
		Unavailable: h.unavailable.Load(), UnavailableNoRetryAfter: h.unavailableNoRetry.Load(),
		TransportErrors: h.transportErrors.Load(), PlacesLost: h.placesLost.Load(),
		Calls: h.calls.Load(), Held: h.held.Load(),
	}
	seen := 0
	for _, v := range h.visitors {
		if v.entered {
			c.Entered++
		}
		if v.admitted {
			c.Admitted++
			if !v.admittedAt.Before(admittedAfter) {
				seen++
			}
		} else if v.entered {
			c.Lost++
		}
		c.OrdersOK += v.ordersOK
		c.OrdersFailed += v.ordersBad
	}
	// A visitor stops at its first pass, so a second admission shows only in the engine's count.
	if engineAdmitted > int64(seen) {
		c.AdmittedTwice = int(engineAdmitted) - seen
	}
	h.mu2.Lock()
	c.Failures = append([]string(nil), h.failures...)
	h.mu2.Unlock()
	return c
}

func (c Counts) String() string {
	return fmt.Sprintf("entered %d, admitted %d, lost %d, admitted twice %d, protected requests %d ok / %d failed, "+
		"503 %d (%d without Retry-After), connection errors %d, places forgotten %d, calls held a second or more %d of %d",
		c.Entered, c.Admitted, c.Lost, c.AdmittedTwice, c.OrdersOK, c.OrdersFailed,
		c.Unavailable, c.UnavailableNoRetryAfter, c.TransportErrors, c.PlacesLost, c.Held, c.Calls)
}
