package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// DrawProgress is what the scheduler observed of the latest draw of a queue's pre-queue.
type DrawProgress struct {
	// OpensAt names the opening the draw belongs to.
	OpensAt time.Time
	// Size is how many pre-queue places the draw found; Placed and Dropped how many it placed in
	// the queue and dropped for silence so far.
	Size, Placed, Dropped int64
	Done                  bool
	// Began and Finished are when this scheduler began and finished it (zero when another
	// scheduler did).
	Began, Finished time.Time
	// Calls counts this scheduler's Redis calls for the draw, and LongestCall is the longest of
	// them: the longest Redis stayed busy with the draw at a stretch.
	Calls       int
	LongestCall time.Duration
	// Seed is where the draw's seed came from, once it was settled; BeaconError the last failure
	// to get a round that verifies, while the draw waits for its beacon.
	Seed        *DrawSeed
	BeaconError string
}

// errNoSeed: the room opened but the scheduler was given no seed to draw the pre-queue with. The
// room stays Opening, admitting nobody, rather than let anyone ahead of the pre-queue.
var errNoSeed = errors.New("the room opened but the pre-queue's draw seed is missing")

// drawRun is a draw under way: the pre-queue in drawn order and how far the placing went.
type drawRun struct {
	state queue.DrawState
	order []int64
	next  int
}

// drawing tells whether the queue's schedule wants a draw now: it has opened (its phase is Open or
// Closed) and this opening's draw is not done.
func (st *tickState) drawing(cfg *Room, current phase.Phase) bool {
	sc := cfg.Schedule
	if sc == nil || (current != phase.Open && current != phase.Closed) {
		return st.draw != nil // a draw once begun is finished, whatever the schedule says now
	}
	return st.draw != nil || !st.drawnFor.Equal(sc.OpensAt)
}

// drawStep begins the draw of the pre-queue when the room has just opened, loads the pre-queue and
// orders it by the seed, then places it in the queue a chunk per Redis call until budget has passed.
// Every call is short (queue.MaxPlaceChunk visitors), so Enter and Status answer between them. When
// a call finds the draw moved on (a retry that had been applied, a second scheduler), the draw is
// reloaded at the next tick; visitors already placed keep their place and the rest keep their order.
func (r *runner) drawStep(ctx context.Context, st *tickState, cfg *Room, current phase.Phase, budget time.Duration) error {
	start := r.s.clock.Now()
	if st.draw == nil {
		if err := r.forgetEarlierOpening(ctx, st, cfg); err != nil {
			return err
		}
		if done, err := r.loadDraw(ctx, st, cfg, current, start); done || err != nil || st.draw == nil {
			// Done, failed, or waiting for the beacon's round: the next tick goes on.
			return err
		}
	}
	d := st.draw
	for d.next < len(d.order) {
		chunk := d.order[d.next:min(d.next+queue.MaxPlaceChunk, len(d.order))]
		var next queue.DrawState
		err := r.timedDrawCall(ctx, func(ctx context.Context) (err error) {
			next, err = st.q.PlaceDrawn(ctx, d.state, chunk, cfg.AbandonAfter, phaseAfterDraw(current))
			return err
		})
		if errors.Is(err, queue.ErrDrawMoved) {
			st.draw = nil
			return nil
		}
		if err != nil {
			return err
		}
		d.state, d.next = next, d.next+len(chunk)
		r.progress(next, time.Time{})
		if next.Done {
			st.draw, st.drawnFor = nil, next.OpensAt
			r.progress(next, r.s.clock.Now())
			ctrl.LoggerFrom(ctx).Info("Drew the pre-queue", "waitingqueue", r.key.String(), "placed", next.Placed, "dropped", next.Dropped)
			return nil
		}
		if r.s.clock.Since(start) >= budget {
			return nil
		}
	}
	// Everyone loaded was placed and the pre-queue is not empty: reload it at the next tick.
	st.draw = nil
	return nil
}

// phaseAfterDraw is the phase the room takes once its draw is done: Open, or Closed when the schedule
// closed it meanwhile.
func phaseAfterDraw(current phase.Phase) phase.Phase {
	if current == phase.Closed {
		return phase.Closed
	}
	return phase.Open
}

// timedDrawCall makes one Redis call of the draw, bounded to a second, and records how long Redis
// was busy with it.
func (r *runner) timedDrawCall(ctx context.Context, f func(context.Context) error) error {
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	// Wall time, whatever clock the grid runs on: this is how long Redis was busy.
	began := time.Now()
	err := f(callCtx)
	d := time.Since(began)
	drawCallHistogram.WithLabelValues(r.key.Namespace, r.key.Name).Observe(d.Seconds())
	r.update(func(s *Snapshot) {
		if s.Draw != nil {
			s.Draw.Calls++
			s.Draw.LongestCall = max(s.Draw.LongestCall, d)
		}
	})
	return err
}

// forgetEarlierOpening drops the passes of an earlier opening, which open nothing now: their slots
// under maxActive go to this one's visitors. Once per opening and runner; a second run finds nothing
// to drop.
func (r *runner) forgetEarlierOpening(ctx context.Context, st *tickState, cfg *Room) error {
	opensAt := cfg.Schedule.OpensAt
	if st.forgotFor.Equal(opensAt) {
		return nil
	}
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second) // a bounded call per thousand passes
	forgotten, err := st.q.ForgetPassesBefore(callCtx, cfg.Schedule.PassesFrom())
	cancel()
	if err != nil {
		return err
	}
	st.forgotFor = opensAt
	if forgotten > 0 {
		ctrl.LoggerFrom(ctx).Info("Dropped the passes of an earlier opening", "waitingqueue", r.key.String(), "passes", forgotten)
	}
	return nil
}

// loadDraw begins the opening's draw and reads the pre-queue into the order the seed gives it, into
// st.draw; done says the draw had finished already.
func (r *runner) loadDraw(ctx context.Context, st *tickState, cfg *Room, current phase.Phase, start time.Time) (done bool, err error) {
	if len(cfg.DrawSeed) != draw.SeedBytes {
		return false, fmt.Errorf("%w: %d bytes, not %d", errNoSeed, len(cfg.DrawSeed), draw.SeedBytes)
	}
	opensAt := cfg.Schedule.OpensAt
	r.update(func(s *Snapshot) {
		if s.Draw == nil || !s.Draw.OpensAt.Equal(opensAt) {
			s.Draw = &DrawProgress{OpensAt: opensAt}
		}
	})
	var ds queue.DrawState
	err = r.timedDrawCall(ctx, func(ctx context.Context) (err error) {
		ds, err = st.q.BeginDraw(ctx, opensAt, phaseAfterDraw(current))
		return err
	})
	if err != nil && !errors.Is(err, queue.ErrDrawMoved) {
		return false, err
	}
	if ds.Done {
		st.drawnFor = ds.OpensAt
		r.progress(ds, r.s.clock.Now())
		if cfg.Schedule.Beacon != nil {
			if err := r.doneDrawSeed(ctx, st, ds); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	if errors.Is(err, queue.ErrDrawMoved) {
		ctrl.LoggerFrom(ctx).Info("Finishing the draw of an earlier opening first", "waitingqueue", r.key.String(), "opensAt", ds.OpensAt)
	}
	var order []int64
	for after := int64(0); ; {
		var page []int64
		if err := r.timedDrawCall(ctx, func(ctx context.Context) (err error) {
			page, err = st.q.DrawArrivals(ctx, after)
			return err
		}); err != nil {
			return false, err
		}
		order = append(order, page...)
		if len(page) == 0 || len(page) < queue.DrawPage {
			break
		}
		after = page[len(page)-1]
	}
	seed, ready, err := r.drawSeedOf(ctx, st, cfg, opensAt)
	if err != nil || !ready {
		return false, err
	}
	draw.Order(seed, order)
	st.draw = &drawRun{state: ds, order: order}
	r.progress(ds, time.Time{})
	r.update(func(s *Snapshot) {
		if s.Draw.Began.IsZero() {
			s.Draw.Began = start
		}
	})
	return false, nil
}

// doneDrawSeed tells where the seed of a draw that is done came from: the record the scheduler that
// drew it settled, or, for a draw that was done as it began because the pre-queue was empty, that
// the room revealed its committed secret alone and took no beacon round, settled so that every
// scheduler tells the same.
func (r *runner) doneDrawSeed(ctx context.Context, st *tickState, ds queue.DrawState) error {
	kept, err := st.q.SettleDrawSeed(ctx, ds.OpensAt, "")
	if errors.Is(err, queue.ErrDrawMoved) {
		return nil
	}
	if err != nil {
		return err
	}
	if kept == "" {
		if ds.Size > 0 {
			// Drawn without a seed record: before the room had a beacon. Nothing to tell.
			return nil
		}
		raw, err := json.Marshal(DrawSeed{Source: herdgatev1alpha1.DrawSeedCommitReveal,
			FallbackReason: "the pre-queue was empty at the opening: there was nothing to draw, and no beacon round was taken"})
		if err != nil {
			return err
		}
		if kept, err = st.q.SettleDrawSeed(ctx, ds.OpensAt, string(raw)); errors.Is(err, queue.ErrDrawMoved) {
			return nil
		} else if err != nil {
			return err
		}
	}
	var d DrawSeed
	if err := json.Unmarshal([]byte(kept), &d); err != nil {
		return fmt.Errorf("the draw's seed record in Redis: %w", err)
	}
	r.noteDrawSeed(ds.OpensAt, d)
	return nil
}

// progress records the draw's state in the snapshot; finished, when set, is when it was done.
func (r *runner) progress(ds queue.DrawState, finished time.Time) {
	r.update(func(s *Snapshot) {
		if s.Draw == nil || !s.Draw.OpensAt.Equal(ds.OpensAt) {
			s.Draw = &DrawProgress{OpensAt: ds.OpensAt}
		}
		s.Draw.Size, s.Draw.Placed, s.Draw.Dropped, s.Draw.Done = ds.Size, ds.Placed, ds.Dropped, ds.Done
		if !finished.IsZero() && s.Draw.Finished.IsZero() && !s.Draw.Began.IsZero() {
			s.Draw.Finished = finished
		}
	})
}
