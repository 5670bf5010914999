package scheduler

import (
	"math/big"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// busyGap is the pause in admissions that ends a busy spell: the rates' window, so that a spell is
// what those rates would have averaged had they been read at the right moment.
const busyGap = rateWindow

// BusySpell is a spell of the room's ticks admitting visitors, with no pause of busyGap or more
// between them (status.lastBusy). The rates over the last 10 s fall as soon as a short herd is
// through; the spell keeps what the room did under it.
type BusySpell struct {
	// Start and End are the first and the last tick of the spell that admitted anyone.
	Start, End time.Time
	// Ongoing says visitors still waited after the spell's last tick.
	Ongoing bool
	// Admitted is how many the spell's ticks admitted; PeakDepth the most that waited at one of them.
	Admitted, PeakDepth int64
	// Tick is the tick the spell ran at: the last tick's admissions take a tick.
	Tick time.Duration
}

// AdmittedPerSecond is Admitted over the spell's ticks, as a decimal string; worked out when read,
// not at every tick.
func (b BusySpell) AdmittedPerSecond() string {
	return capacity.DecimalString(new(big.Rat).SetFrac64(b.Admitted*int64(time.Second), int64(b.End.Sub(b.Start)+b.Tick)))
}

// take counts a tick that admitted admitted and left waiting in the room's queues; it says whether
// the spell changed.
func (b *BusySpell) take(now time.Time, tick time.Duration, admitted, waiting int64) bool {
	if admitted == 0 {
		if b.Ongoing && waiting == 0 {
			b.Ongoing = false
			return true
		}
		return false
	}
	if b.Start.IsZero() || now.Sub(b.End) >= busyGap {
		*b = BusySpell{Start: now}
	}
	b.End, b.Tick, b.Ongoing = now, tick, waiting > 0
	b.Admitted += admitted
	b.PeakDepth = max(b.PeakDepth, waiting+admitted)
	return true
}

// waitingAfter is how many wait in the room's queues after the tick res answers, as far as it tells.
func waitingAfter(res queue.AdmitResult) int64 {
	var n int64
	for _, f := range res.Fronts {
		n += f.Depth
	}
	return n
}
