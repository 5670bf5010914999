package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// busyWindow makes l.busyRooms busy: suspended while visitors fill them for the whole window (and a
// margin), then admitting at their plan while the window is watched. Afterwards it times mode changes
// to a busy room's proxy, and waits for the rooms to be idle again.
func (r *run) busyWindow(ctx context.Context, l *level) error {
	const margin = 20 * time.Second
	rooms := l.busyRooms
	r.logf("filling %d busy rooms", len(rooms))
	if err := r.suspend(ctx, rooms, true); err != nil {
		return err
	}
	perRoom := int(140 * (r.busy + margin).Seconds()) // the reference plan: 140 a second
	var entered atomic.Int64
	if err := parallel(ctx, 64, len(rooms)*perRoom, func(i int) error {
		q, err := r.store.Queue(namespace, rooms[i%len(rooms)])
		if err != nil {
			return err
		}
		_, err = q.Enter(ctx, "v"+strconv.Itoa(i), time.Hour)
		entered.Add(1)
		return err
	}); err != nil {
		return err
	}
	filled, err := r.stats(ctx, rooms)
	if err != nil {
		return err
	}
	var waiting, admitted, abandoned int64
	for _, st := range filled {
		waiting, admitted, abandoned = waiting+st.Depth, admitted+st.AdmittedTotal, abandoned+st.AbandonedTotal
	}
	r.logf("%d visitors entered, %d wait (the busy rooms have admitted %d and abandoned %d so far); opening the busy rooms", entered.Load(), waiting, admitted, abandoned)
	if err := r.suspend(ctx, rooms, false); err != nil {
		return err
	}
	// Every busy room admits again before the window begins.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	admittedTotal := func(stats []queue.Stats) (n int64) {
		for _, st := range stats {
			n += st.AdmittedTotal
		}
		return n
	}
	opened, err := r.stats(ctx, rooms)
	if err != nil {
		return err
	}
	if l.busy, err = r.watch(ctx, r.busy, fmt.Sprintf("busy-%d", l.rooms)); err != nil {
		return err
	}
	closed, err := r.stats(ctx, rooms)
	if err != nil {
		return err
	}
	r.logf("Redis counted %d admitted before the window and %d in it; the manager's metric %0.f in it",
		admittedTotal(opened), admittedTotal(closed)-admittedTotal(opened), l.busy.admitted(rooms))
	for _, st := range closed {
		if st.Depth == 0 {
			l.ranDry++
		}
	}
	// Over the time between the two reads of the manager's counters that admitted() compares.
	l.target = 140 * l.busy.counted * float64(len(rooms))
	if r.modeChanges > 0 {
		if l.modeChanges, err = r.timeModeChanges(ctx, rooms[0]); err != nil {
			return err
		}
	}
	r.logf("waiting for the busy rooms to empty")
	return waitFor(ctx, 5*time.Minute, "the busy rooms to empty", func() (bool, error) {
		stats, err := r.stats(ctx, rooms)
		if err != nil {
			return false, err
		}
		for _, st := range stats {
			if st.Depth > 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// stats reads the counters of each of rooms, in order.
func (r *run) stats(ctx context.Context, rooms []string) ([]queue.Stats, error) {
	out := make([]queue.Stats, 0, len(rooms))
	for _, name := range rooms {
		q, err := r.store.Queue(namespace, name)
		if err != nil {
			return nil, err
		}
		st, err := q.Stats(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
