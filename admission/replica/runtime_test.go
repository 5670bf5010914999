package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// The runtime's loops, each run once against an engine and a room in memory; the admission tests run
// them against a real Redis.

type runtimeEngine struct {
	failSessions error
	sessions     [][]queue.Release
	reports      []queue.ProxyReport
	// reported, when set, takes every report as it is sent.
	reported chan queue.ProxyReport
}

func (e *runtimeEngine) PingFor(context.Context, time.Time) error { return nil }
func (e *runtimeEngine) ReportProxy(ctx context.Context, r queue.ProxyReport) error {
	if e.reported != nil {
		select {
		case e.reported <- r:
		case <-ctx.Done():
		}
		return nil
	}
	e.reports = append(e.reports, r)
	return nil
}
func (e *runtimeEngine) ReportWorkload(context.Context, queue.WorkloadReport, []queue.PassUse) error {
	return nil
}
func (e *runtimeEngine) Sessions(_ context.Context, releases []queue.Release, _ []queue.Renewal, _ int64, _ int) (queue.SessionsResult, error) {
	if e.failSessions != nil {
		return queue.SessionsResult{}, e.failSessions
	}
	e.sessions = append(e.sessions, releases)
	return queue.SessionsResult{}, nil
}

type runtimeRoom struct{ answered []error }

func (r *runtimeRoom) Settings() (replica.Settings, bool) {
	return replica.Settings{Tick: 100 * time.Millisecond}, true
}
func (r *runtimeRoom) FarPath(context.Context) (time.Duration, bool) { return time.Minute, false }
func (r *runtimeRoom) RedisAnswered(err error)                       { r.answered = append(r.answered, err) }

func newRuntime(engine *runtimeEngine, room *runtimeRoom, replicaName string) *replica.Runtime {
	return &replica.Runtime{Name: "shop/orders", Room: room, Engine: engine, Report: replica.NewConfigReport(replicaName),
		Sessions: replica.NewSessions(), Workload: replica.NewWorkloadMeter(), Far: replica.NewFarPositions(), Reclaims: &replica.Reclaims{},
		Metrics: replica.Metrics{Releases: prometheus.NewCounter(prometheus.CounterOpts{Name: "releases"}),
			FarSigns: prometheus.NewCounter(prometheus.CounterOpts{Name: "far_signs"}), FarSnapshots: prometheus.NewCounter(prometheus.CounterOpts{Name: "far_snapshots"}),
			Reclaimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "reclaimed"}), ReclaimedWaiting: prometheus.NewCounter(prometheus.CounterOpts{Name: "reclaimed_waiting"})},
		Log: logr.Discard(), Now: time.Now}
}

func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestARuntimeKeepsTheReleasesRedisDidNotTake: a release this replica owes Redis survives a failed
// sync and goes with the next, and is counted once, when it went.
func TestARuntimeKeepsTheReleasesRedisDidNotTake(t *testing.T) {
	engine, room := &runtimeEngine{failSessions: errors.New("redis is down")}, &runtimeRoom{}
	rt := newRuntime(engine, room, "proxy-0")
	now := time.Now()
	rt.Sessions.Release(pass.Pass{Visitor: "v1", NotBefore: now, Expiry: now.Add(time.Minute)})
	if err := rt.SyncSessions(context.Background()); err == nil {
		t.Fatal("a sync with Redis down succeeded")
	}
	if got := counted(t, rt.Metrics.Releases); got != 0 {
		t.Fatalf("releases counted after a failed sync: %v, want 0", got)
	}
	engine.failSessions = nil
	if err := rt.SyncSessions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(engine.sessions) != 1 || len(engine.sessions[0]) != 1 || engine.sessions[0][0].Visitor != "v1" {
		t.Fatalf("releases sent: %+v, want v1's once", engine.sessions)
	}
	if got := counted(t, rt.Metrics.Releases); got != 1 {
		t.Fatalf("releases counted: %v, want 1", got)
	}
}

// TestARuntimeReportsItsConfigOnlyWithAReplicaName: a replica without a name (a program serving a
// room of its own) reports nothing; one with a name reports what it serves at once, and a refusal
// after it.
func TestARuntimeReportsItsConfigOnlyWithAReplicaName(t *testing.T) {
	engine := &runtimeEngine{}
	newRuntime(engine, &runtimeRoom{}, "").ReportConfig(context.Background()) // returns at once
	if len(engine.reports) != 0 {
		t.Fatalf("a replica without a name reported %+v", engine.reports)
	}
	engine.reported = make(chan queue.ProxyReport)
	rt := newRuntime(engine, &runtimeRoom{}, "proxy-0")
	rt.Report.Applied(3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.ReportConfig(ctx) }()
	defer func() { cancel(); <-done }()
	if got := <-engine.reported; got.Replica != "proxy-0" || got.Generation != 3 || got.RefusedGeneration != 0 {
		t.Fatalf("first report: %+v, want proxy-0 serving generation 3", got)
	}
	rt.Report.Refused(4, "bad template")
	// Reports come at least every ReportInterval; three of them without the refusal is a failure,
	// not a wait.
	for range 3 {
		if got := <-engine.reported; got.RefusedGeneration == 4 && got.Refusal == "bad template" && got.Generation == 3 {
			return
		}
	}
	t.Fatal("three reports after the refusal, none of them with it")
}
