// Package admissiontest is the test kit of the gate: an engine in memory, for tests of its decisions
// and of fronts that need no Redis. The integration tests run the same decisions on a real Redis.
package admissiontest

import (
	"context"
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// MemoryEngine is an admission.Engine in memory. Every visitor's enter and status answer is the
// position set for it. A visitor with none that enters takes the next place at the back, as on a
// real queue, and keeps it; one that only asks its status is not queued. The plan is the one set.
type MemoryEngine struct {
	mu        sync.Mutex
	positions map[string]queue.Position
	plan      queue.PublishedPlan
	err       error
	// arrivals counts the places entering handed out.
	arrivals int64
}

// NewMemoryEngine is an engine that serves plan.
func NewMemoryEngine(plan queue.PublishedPlan) *MemoryEngine {
	return &MemoryEngine{positions: map[string]queue.Position{}, plan: plan}
}

// SetPosition makes pos the answer to visitor's enter and status.
func (e *MemoryEngine) SetPosition(visitor string, pos queue.Position) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.positions[visitor] = pos
}

// Fail makes every call fail with err from now on; nil heals the engine.
func (e *MemoryEngine) Fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

func (e *MemoryEngine) failure() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func (e *MemoryEngine) position(visitor string) (queue.Position, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return queue.Position{}, e.err
	}
	return e.positions[visitor], nil
}

func (e *MemoryEngine) EnterFrom(_ context.Context, v string, _ time.Duration, _ queue.EntryLimit) (queue.Position, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return queue.Position{}, e.err
	}
	if pos, ok := e.positions[v]; ok {
		return pos, nil
	}
	e.arrivals++
	pos := queue.Position{State: queue.Waiting, Position: e.arrivals, Depth: e.arrivals, Seq: e.arrivals, Now: time.Now()}
	e.positions[v] = pos
	return pos, nil
}

func (e *MemoryEngine) Status(_ context.Context, v string, _ time.Duration) (queue.Position, error) {
	return e.position(v)
}

func (e *MemoryEngine) ReadPlan(context.Context) (queue.PublishedPlan, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return queue.PublishedPlan{}, e.err
	}
	return e.plan, nil
}

func (e *MemoryEngine) PingFor(context.Context, time.Time) error { return e.failure() }

func (e *MemoryEngine) Sessions(context.Context, []queue.Release, []queue.Renewal, int64, int) (queue.SessionsResult, error) {
	return queue.SessionsResult{}, e.failure()
}

func (e *MemoryEngine) ReportProxy(context.Context, queue.ProxyReport) error { return e.failure() }

func (e *MemoryEngine) ReportWorkload(context.Context, queue.WorkloadReport, []queue.PassUse) error {
	return e.failure()
}
