package admission_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// scheduledHarness is a harness whose queue opens at opensAt, with its pre-queue from preQueueFrom.
// The proxy reads the plan at every request, so that a phase published by the test applies at once.
func scheduledHarness(t *testing.T, preQueueFrom, opensAt time.Time, change func(*herdgatev1alpha1.WaitingQueue)) *harness {
	t.Helper()
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Schedule = builder.Queue("", "").Schedule(preQueueFrom, opensAt, time.Time{}).Obj().Spec.Schedule
		if change != nil {
			change(wq)
		}
	})
	h.room.ReadPlansFresh(h.q)
	return h
}

// publishPhase publishes the reference plan in phase, with the harness's schedule, as the scheduler
// would on its tick.
func (h *harness) publishPhase(phase phase.Phase) {
	h.t.Helper()
	sc := h.room.Config().Schedule
	if err := h.q.PublishPlan(context.Background(), queue.PublishedPlan{
		Quota: mustQuota(14), PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: 5 * time.Minute,
		Phase: phase, PreQueueFrom: sc.PreQueueFrom, OpensAt: sc.OpensAt, ClosesAt: sc.ClosesAt,
	}); err != nil {
		h.t.Fatal(err)
	}
}

func expectNotOpen(t *testing.T, what string, res response, phase string, enter bool) map[string]any {
	t.Helper()
	body := res.json(t)
	if res.StatusCode != http.StatusForbidden || body["error"] != "not_open" || body["phase"] != phase || body["opensAt"] == nil || body["preQueueFrom"] == nil {
		t.Fatalf("%s: %d %s; want 403 not_open in %s with the schedule", what, res.StatusCode, res.body, phase)
	}
	if got := body["enter"] != nil; got != enter {
		t.Fatalf("%s: enter link %v, want %v", what, body["enter"], enter)
	}
	return body
}

func TestAScheduledRoomIsClosedUntilItOpens(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	preQueueFrom, opensAt := now.Add(time.Hour), now.Add(2*time.Hour)
	h := scheduledHarness(t, preQueueFrom, opensAt, func(wq *herdgatev1alpha1.WaitingQueue) {
		// FailOpen lets nobody in before the opening either.
		wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{FailurePolicy: herdgatev1alpha1.FailOpen}
	})
	v := h.visitor()

	// No plan of this schedule yet: the proxy's clock says Scheduled.
	body := expectNotOpen(t, "enter before the pre-queue", v.enter(), string(phase.Scheduled), false)
	if retry := body["retryAfterMs"].(float64); retry <= 0 || retry > float64(admission.MaxNotOpenRetry.Milliseconds()) {
		t.Fatalf("retryAfterMs %v, want within (0, %s]", retry, admission.MaxNotOpenRetry)
	}
	if body["opensAt"] != opensAt.UTC().Format(time.RFC3339) || body["preQueueFrom"] != preQueueFrom.UTC().Format(time.RFC3339) {
		t.Fatalf("the schedule in the answer: %v", body)
	}
	h.publishPhase(phase.Scheduled)
	expectNotOpen(t, "enter while Scheduled", v.enter(), string(phase.Scheduled), false)
	expectNotOpen(t, "an order while Scheduled", v.do(http.MethodPost, "/api/v1/orders", strings.NewReader("{}")), string(phase.Scheduled), false)
	res := v.do(http.MethodGet, "/checkout", nil, "Accept", "text/html")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/.herdgate/?return=") {
		t.Fatalf("a browser while Scheduled: %d %q, want the waiting page", res.StatusCode, res.Header.Get("Location"))
	}

	// Redis down before the opening: FailOpen does not open the room early.
	h.redis.Stop()
	_ = h.room.CheckRedis(context.Background())
	if res := v.do(http.MethodPost, "/api/v1/orders", nil); res.StatusCode == http.StatusOK {
		t.Fatal("FailOpen let a request through before opensAt")
	}
	if err := h.redis.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := h.room.CheckRedis(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls := h.upstream.all(); len(calls) != 0 {
		t.Fatalf("requests reached the workload before the opening: %v", calls)
	}
}

func TestThePreQueueDrawAndTheQueueBehindItThroughTheProxy(t *testing.T) {
	now := time.Now()
	h := scheduledHarness(t, now.Add(-time.Minute), now.Add(time.Hour), nil)
	ctx := context.Background()

	// The proxy's clock says PreQueue, but the scheduler has not published it: no place is taken
	// (the engine would queue the visitor as in a room without a schedule).
	v0 := h.visitor()
	if res := v0.enter(); res.StatusCode != http.StatusServiceUnavailable || res.json(t)["error"] != "queue_starting" || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("enter before the scheduler published the schedule: %d %s", res.StatusCode, res.body)
	}

	// Nor does status say Open, though the engine, without this schedule's plan, would.
	if res := v0.status(); res.StatusCode != http.StatusNotFound || res.json(t)["phase"] != string(phase.PreQueue) {
		t.Fatalf("status before the scheduler published the schedule: %d %s", res.StatusCode, res.body)
	}

	h.publishPhase(phase.PreQueue)
	visitors := make([]*visitor, 30)
	byArrival := map[int64]*visitor{}
	for i := range visitors {
		visitors[i] = h.visitor()
		res := visitors[i].enter()
		body := res.json(t)
		if res.StatusCode != http.StatusOK || body["phase"] != string(phase.PreQueue) || body["arrival"] != float64(i+1) || body["queueDepth"] != float64(i+1) ||
			body["position"] != 0.0 || body["estimatedWaitSeconds"] != nil || body["opensAt"] == nil {
			t.Fatalf("pre-queue enter %d: %d %s", i, res.StatusCode, res.body)
		}
		if hint := body["nextPollMs"].(float64); hint < 4000 || hint > 6000 {
			t.Fatalf("a pre-queue visitor's poll hint %v, want about pollMax", hint)
		}
		byArrival[int64(i+1)] = visitors[i]
	}
	// A poll right after entering is too early; the place is kept.
	if res := visitors[0].status(); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an early poll in the pre-queue: %d %s", res.StatusCode, res.body)
	}
	expectNotOpen(t, "an order during the pre-queue", visitors[0].do(http.MethodPost, "/api/v1/orders", nil), string(phase.PreQueue), true)

	// Opening: while the draw runs, a pre-queue visitor and a newcomer are told Opening.
	st, err := h.q.BeginDraw(ctx, h.room.Config().Schedule.OpensAt, phase.Open)
	if err != nil {
		t.Fatal(err)
	}
	late := h.visitor()
	if res := late.enter(); res.StatusCode != http.StatusOK || res.json(t)["phase"] != string(phase.Opening) {
		t.Fatalf("enter during the draw: %d %s", res.StatusCode, res.body)
	}
	time.Sleep(4100 * time.Millisecond) // the shortest pre-queue interval, less the jitter room
	if res := visitors[3].status(); res.StatusCode != http.StatusOK || res.json(t)["phase"] != string(phase.Opening) {
		t.Fatalf("status during the draw: %d %s", res.StatusCode, res.body)
	}
	res := late.do(http.MethodPost, "/api/v1/orders", nil)
	if res.StatusCode != http.StatusForbidden || res.json(t)["error"] != "pass_required" {
		t.Fatalf("an order during the draw: %d %s, want pass_required", res.StatusCode, res.body)
	}

	seed := []byte("a seed of thirty-two bytes, ok!!")
	arrivals, err := h.q.PreQueueArrivals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	draw.Order(seed, arrivals)
	if _, err := h.q.PlaceDrawn(ctx, st, arrivals, 5*time.Minute, phase.Open); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // visitors[3] polled during the draw
	for place, a := range arrivals {
		res := byArrival[a].status()
		body := res.json(t)
		if res.StatusCode != http.StatusOK || body["position"] != float64(place+1) || body["phase"] != string(phase.Open) {
			t.Fatalf("the visitor of arrival %d after the draw: %d %s; want position %d, Open", a, res.StatusCode, res.body, place+1)
		}
	}
	time.Sleep(600 * time.Millisecond)
	if body := late.status().json(t); body["position"] != float64(len(arrivals)+1) {
		t.Fatalf("the visitor who came during the draw: %v, want position %d", body, len(arrivals)+1)
	}

	// A tick admits in the drawn order; the first drawn gets its pass and reaches the workload.
	h.admit(2, 0)
	first := byArrival[arrivals[0]]
	time.Sleep(100 * time.Millisecond)
	body := first.status().json(t)
	token, _ := body["pass"].(string)
	if body["admitted"] != true || token == "" || body["phase"] != string(phase.Open) {
		t.Fatalf("the first drawn visitor after a tick: %v", body)
	}
	if res := first.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, token); res.StatusCode != http.StatusOK {
		t.Fatalf("the first drawn visitor's order: %d %s", res.StatusCode, res.body)
	}
	if calls := h.upstream.all(); len(calls) != 1 {
		t.Fatalf("the workload saw %d requests, want 1", len(calls))
	}

	// Closing: newcomers are turned away with 503; those queued keep their places.
	h.publishPhase(phase.Closed)
	res = h.visitor().enter()
	if res.StatusCode != http.StatusServiceUnavailable || res.json(t)["error"] != "closed" || res.json(t)["phase"] != string(phase.Closed) ||
		res.Header.Get("Retry-After") != "300" || res.json(t)["retryAfterMs"] != 300000.0 {
		t.Fatalf("enter after closing: %d %s, Retry-After %q; want 503 closed, to come back in 5 minutes", res.StatusCode, res.body, res.Header.Get("Retry-After"))
	}
	if res := late.do(http.MethodPost, "/api/v1/orders", nil); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("an order without a pass after closing: %d, Retry-After %q; want 503 with one", res.StatusCode, res.Header.Get("Retry-After"))
	}
	third := byArrival[arrivals[2]]
	time.Sleep(600 * time.Millisecond)
	if res := third.status(); res.StatusCode != http.StatusOK || res.json(t)["position"] != 1.0 {
		t.Fatalf("a queued visitor after closing: %d %s, want position 1", res.StatusCode, res.body)
	}
}

// TestAPassDoesNotOutliveItsOpening: a pass of an earlier opening (or one kept alive by Sliding
// renewal since) opens nothing once a new schedule applies, before its opensAt or after; the passes
// of the new opening do.
func TestAPassDoesNotOutliveItsOpening(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		now := time.Now().Truncate(time.Second)
		// The last opening was three hours ago; its pass was extended until an hour from now.
		h := scheduledHarness(t, now.Add(-3*time.Hour-15*time.Minute), now.Add(-3*time.Hour), func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
		})
		h.publishPhase(phase.Open)
		old := h.room.Config().Signer.Issue("early-bird", now.Add(-3*time.Hour).Add(time.Second), now.Add(time.Hour))
		order := func(token string) response {
			return h.visitor().do(http.MethodPost, "/api/v1/orders", strings.NewReader("{}"), "X-User-Id", "early-bird", admission.PassHeader, token)
		}
		if res := order(old); res.StatusCode != http.StatusOK {
			t.Fatalf("the pass in its own opening: %d %s", res.StatusCode, res.body)
		}

		// The next launch: its pre-queue began five minutes ago, it opens in an hour.
		preQueueFrom, opensAt := now.Add(-5*time.Minute), now.Add(time.Hour)
		next := changed(h.wq, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Schedule = builder.Queue("", "").Schedule(preQueueFrom, opensAt, time.Time{}).Obj().Spec.Schedule
		})
		cfg, err := admission.NewConfig(next, h.key)
		if err != nil {
			t.Fatal(err)
		}
		h.room.SetConfig(cfg)
		h.publishPhase(phase.PreQueue)
		res := order(old)
		if res.StatusCode != http.StatusForbidden || res.Header.Get("X-Herdgate-Pass-Result") != string(pass.EarlierOpening) {
			t.Fatalf("the earlier opening's pass before opensAt: %d %q %s, want 403 %s", res.StatusCode,
				res.Header.Get("X-Herdgate-Pass-Result"), res.body, pass.EarlierOpening)
		}
		if got := h.metric("herdgate_proxy_pass_verifications_total", `{result="earlier_opening"}`); got < 1 {
			t.Fatalf("earlier_opening verifications counted: %v", got)
		}
		// A pass issued a second before the pre-queue began is of the earlier opening too.
		if res := order(h.room.Config().Signer.Issue("early-bird", preQueueFrom.Add(-time.Second), now.Add(time.Hour))); res.StatusCode != http.StatusForbidden {
			t.Fatalf("a pass issued just before the pre-queue: %d", res.StatusCode)
		}

		// Opened: the old pass still opens nothing, a pass of this opening does.
		h.publishPhase(phase.Open)
		if res := order(old); res.StatusCode != http.StatusForbidden {
			t.Fatalf("the earlier opening's pass after opensAt: %d, want 403", res.StatusCode)
		}
		if res := order(h.room.Config().Signer.Issue("early-bird", now.Add(-time.Second), now.Add(time.Hour))); res.StatusCode != http.StatusOK {
			t.Fatalf("a pass of the new opening: %d %s", res.StatusCode, res.body)
		}
	})
}
