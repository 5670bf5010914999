package herd

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/ptr"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// The lanes of the experiment: members join by the header the site's gateway sets after login,
// presale visitors by a signed code of as many uses as there are of them; the rest wait in the main
// queue.
const (
	membersHeader = "X-Member-Tier"
	membersValue  = "gold-tier-0123456789"
	presaleKey    = "the presale codes' key, 32 bytes or more"
)

// LanesSpec is a herd into a room with two metered lanes and an event of more capacity in the middle
// of the run.
type LanesSpec struct {
	// Main, Members and Presale are the visitors of each; all enter at once, before the windows.
	Main, Members, Presale int
	// MembersPercent and PresalePercent are the lanes' shares of every tick.
	MembersPercent, PresalePercent int32
	// Before, Event and After are the windows measured: the room's own plan, the event's, and the
	// room's again.
	Before, Event, After time.Duration
	// EventUtilization is the utilizationPercent the event runs at (the room runs at 70).
	EventUtilization int32
}

// LaneWindow is what one window admitted, by lane.
type LaneWindow struct {
	Name       string
	From, To   time.Time
	Ticks      int
	PerTick    int64 // the plan's batch in the window (the largest quota of its ticks)
	ByLane     map[string]int
	Total      int
	PerSecond  float64
	Unfinished bool // a lane ran dry within the window: its share is not measured
}

// LanesResult is what the herd measured.
type LanesResult struct {
	LanesSpec
	Windows []LaneWindow
	// Shares are the lanes' planned percentages, main included.
	Shares map[string]float64
	// Ordered counts the visitors who placed their order; Failed the others, Errors the first reasons.
	Ordered, Failed int
	Errors          []string
}

// laneOf is the lane a visitor's ID says it joined.
func laneOf(id string) string {
	switch {
	case strings.HasPrefix(id, "member-"):
		return "members"
	case strings.HasPrefix(id, "presale-"):
		return "presale"
	}
	return queue.MainLane
}

// Lanes runs the herd in this process: Redis, the scheduler (its ticks observed), a proxy and the
// stand-in orders service. Progress goes to log.
func Lanes(ctx context.Context, spec LanesSpec, log io.Writer) (LanesResult, error) {
	res := LanesResult{LanesSpec: spec, Shares: map[string]float64{
		queue.MainLane: float64(100-spec.MembersPercent-spec.PresalePercent) / 100,
		"members":      float64(spec.MembersPercent) / 100, "presale": float64(spec.PresalePercent) / 100,
	}}
	redis, store, stop, err := startRedis()
	if err != nil {
		return res, err
	}
	defer stop()
	backend := NewBackend(PoolSize, RequestLatency, PoolTimeout)
	workload := httptest.NewServer(backend)
	defer workload.Close()

	// The windows start once every visitor has entered; times in whole seconds, as the API keeps them.
	now := time.Now().Truncate(time.Second)
	measureFrom := now.Add(5 * time.Second)
	eventStart := measureFrom.Add(spec.Before)
	eventEnd := eventStart.Add(spec.Event)
	measureTo := eventEnd.Add(spec.After)
	surge := builder.Event("surge", eventStart, eventEnd)
	surge.Capacity = &herdgatev1alpha1.EventCapacity{UtilizationPercent: ptr.To(spec.EventUtilization)}
	surge.Page = &herdgatev1alpha1.EventPage{Message: ptr.To("More orders a second for the surge")}
	// The room holds everyone until the first window: it opens suspended (generation 1), and
	// generation 2 admits.
	b := builder.Queue("herd", "lanes").UID("herd-lanes").Generation(1).
		Capacity(PoolSize, RequestLatency, 70).Tick(Tick).UpstreamURL(workload.URL).Identity(IdentityHeader).
		AbandonAfter(5*time.Minute).
		Lanes(builder.LaneByHeader("members", spec.MembersPercent, membersHeader, "lanes", "members"),
			builder.LaneByCode("presale", spec.PresalePercent, "lanes", "presale")).
		Events(surge)
	wq := b.Suspend(true).Obj()
	s, err := settings.Derive(wq)
	if err != nil {
		return res, err
	}
	open, err := settings.Derive(b.Suspend(false).Generation(2).Obj())
	if err != nil {
		return res, err
	}
	secrets := map[string]string{herdgatev1alpha1.SecretRefKey("lanes", "members"): membersValue, herdgatev1alpha1.SecretRefKey("lanes", "presale"): presaleKey}
	_, base, stopServing, err := serveRoom(wq, store, secrets, log)
	if err != nil {
		return res, err
	}
	defer stopServing()

	var mu sync.Mutex
	var reports []scheduler.TickReport
	sched := scheduler.New(&queue.Pool{}, scheduler.WithTickObserver(func(r scheduler.TickReport) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	}))
	schedCtx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); _ = sched.Start(schedCtx) }()
	defer func() { stopSched(); <-schedDone }()
	sched.Ensure(scheduler.Room{Settings: s, RedisURL: redis.URL()})

	code, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"aud": "herd/lanes", "lane": "presale", "uses": spec.Presale, "exp": measureTo.Add(time.Hour).Unix(),
	}).SignedString([]byte(presaleKey))
	if err != nil {
		return res, err
	}
	fmt.Fprintf(log, "[herd] lanes: %d main, %d members (%d %%), %d presale (%d %%); the surge at %d %% from %s to %s\n",
		spec.Main, spec.Members, spec.MembersPercent, spec.Presale, spec.PresalePercent, spec.EventUtilization,
		eventStart.Format(time.TimeOnly), eventEnd.Format(time.TimeOnly))
	ctx, cancel := context.WithTimeout(ctx, measureTo.Sub(now)+5*time.Minute)
	defer cancel()
	c := LaunchClient()
	var visitors []*laneVisitor
	for _, g := range []struct {
		prefix string
		n      int
		header []string
	}{
		{"main-", spec.Main, nil},
		{"member-", spec.Members, []string{membersHeader, membersValue}},
		{"presale-", spec.Presale, []string{admission.LaneCodeHeader, code}},
	} {
		for i := range g.n {
			visitors = append(visitors, &laneVisitor{id: fmt.Sprintf("%s%05d", g.prefix, i), header: g.header})
		}
	}
	// Every visitor enters before the first window, the lanes interleaved.
	sort.Slice(visitors, func(a, b int) bool {
		return visitors[a].id[len(visitors[a].id)-5:] < visitors[b].id[len(visitors[b].id)-5:]
	})
	var wg sync.WaitGroup
	for _, v := range visitors {
		wg.Go(func() { v.visit(ctx, c, base) })
	}
	time.Sleep(time.Until(measureFrom))
	sched.Ensure(scheduler.Room{Settings: open, RedisURL: redis.URL()})
	wg.Wait()
	for _, v := range visitors {
		if v.err != nil {
			res.Failed++
			if len(res.Errors) < 5 {
				res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", v.id, v.err))
			}
			continue
		}
		res.Ordered++
	}
	mu.Lock()
	defer mu.Unlock()
	res.Windows = laneWindows(reports, []LaneWindow{
		{Name: "before the surge", From: measureFrom, To: eventStart},
		{Name: "the surge (event)", From: eventStart, To: eventEnd},
		{Name: "after the surge", From: eventEnd, To: measureTo},
	})
	return res, nil
}

// laneWindows counts the admissions of each window's ticks by lane.
func laneWindows(reports []scheduler.TickReport, windows []LaneWindow) []LaneWindow {
	for i := range windows {
		w := &windows[i]
		w.ByLane = map[string]int{}
		for _, r := range reports {
			if r.Scheduled.Before(w.From) || !r.Scheduled.Before(w.To) {
				continue
			}
			w.Ticks++
			w.PerTick = max(w.PerTick, r.Quota)
			for _, a := range r.Result.Admitted {
				w.ByLane[laneOf(a.ID)]++
				w.Total++
			}
			if int64(len(r.Result.Admitted)) < r.Quota {
				w.Unfinished = true
			}
		}
		w.PerSecond = float64(w.Total) / w.To.Sub(w.From).Seconds()
	}
	return windows
}

// ShareError is the largest relative gap, over the windows every lane stayed busy through, between a
// lane's share of the admissions and its planned share.
func (r LanesResult) ShareError() float64 {
	worst := 0.0
	for _, w := range r.Windows {
		if w.Unfinished || w.Total == 0 {
			continue
		}
		for lane, want := range r.Shares {
			got := float64(w.ByLane[lane]) / float64(w.Total)
			worst = math.Max(worst, math.Abs(got-want)/want)
		}
	}
	return worst
}

// LanesReport writes the herd's report in Markdown.
func LanesReport(w io.Writer, r LanesResult) {
	fmt.Fprintf(w, "%d visitors enter at once: %d in the main queue, %d members (a header the gateway sets, %d %% of every tick), %d with a presale code (%d %%); the room admits 14 a tick (140 a second, utilization 70 %%), and the event `surge` runs it at %d %% for %s in the middle. Every visitor polls as told and places one order with its pass.\n\n",
		r.Main+r.Members+r.Presale, r.Main, r.Members, r.MembersPercent, r.Presale, r.PresalePercent, r.EventUtilization, r.Event)
	fmt.Fprintf(w, "| window | ticks | batch | admitted a second | main (%.0f %%) | members (%.0f %%) | presale (%.0f %%) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
		100*r.Shares[queue.MainLane], 100*r.Shares["members"], 100*r.Shares["presale"])
	for _, win := range r.Windows {
		cell := func(lane string) string {
			if win.Total == 0 {
				return "–"
			}
			got := float64(win.ByLane[lane]) / float64(win.Total)
			return fmt.Sprintf("%d (%.2f %%, %+.2f %% of its share)", win.ByLane[lane], 100*got, 100*(got-r.Shares[lane])/r.Shares[lane])
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.1f | %s | %s | %s |\n", win.Name, win.Ticks, win.PerTick, win.PerSecond, cell(queue.MainLane), cell("members"), cell("presale"))
	}
	fmt.Fprintf(w, "\nThe largest gap between a lane's share of a window's admissions and its planned share: %.2f %% of the share (the goal: within 2 %%). %d of %d visitors placed their order",
		100*r.ShareError(), r.Ordered, r.Ordered+r.Failed)
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "; the first failures: %s", strings.Join(r.Errors, "; "))
	}
	fmt.Fprintln(w, ".")
}

// laneVisitor enters with its lane's header, polls as told, and places one order with its pass.
type laneVisitor struct {
	id     string
	header []string
	err    error
}

func (v *laneVisitor) visit(ctx context.Context, c *http.Client, base string) {
	enter := true
	for ctx.Err() == nil {
		method, path := nextCall(enter)
		code, body, err := laneCall(c, method, base+path, v.id, "", v.header)
		if err != nil {
			v.err = err
			return
		}
		var wait time.Duration
		switch {
		case code == http.StatusOK && body["admitted"] == true:
			pass, _ := body["pass"].(string)
			code, _, err := laneCall(c, http.MethodPost, base+"/api/v1/orders", v.id, pass, nil)
			switch {
			case err != nil:
				v.err = err
			case code != http.StatusOK:
				v.err = fmt.Errorf("the order with a pass got %d", code)
			}
			return
		case code == http.StatusOK:
			if enter && laneOf(v.id) != queue.MainLane && body["lane"] != laneOf(v.id) {
				v.err = fmt.Errorf("entered in lane %v, not %s", body["lane"], laneOf(v.id))
				return
			}
			enter = false
			wait = millis(body, "nextPollMs")
		case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
			wait = millis(body, "retryAfterMs")
		case code == http.StatusNotFound:
			enter = true
			wait = 100 * time.Millisecond
		default:
			v.err = fmt.Errorf("%s %s: %d %v", method, path, code, body)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	v.err = ctx.Err()
}

// laneCall is launchCall with the visitor's lane header.
func laneCall(c *http.Client, method, url, visitor, pass string, header []string) (int, map[string]any, error) {
	return launchCallWith(c, method, url, visitor, pass, header)
}
