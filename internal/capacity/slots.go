package capacity

import (
	"math"
	"time"
)

// Slots is what the scheduler measured of a room that caps its active passes
// (spec.capacity.maxActive). While the cap is full, an admission waits for a pass to end as well
// as for the plan, so a wait is the longer of the two.
type Slots struct {
	// Max is the cap, and Active the passes active (admitted, not expired, not released) when they
	// were counted.
	Max, Active int64
	// Held is how long the passes that ended over Counted (released, completed or expired) had held
	// their slot, on average; 0 when none ended. ReleasedPerSecond is how many the workload ended a
	// second.
	Held              time.Duration
	ReleasedPerSecond float64
	Counted           time.Duration
	// Ages are the ages of the active passes, from the youngest (Ages[0]) to the oldest, at even
	// steps of their count, the oldest admitted first; all zero when unknown.
	Ages [SlotAgeSteps + 1]time.Duration
}

// SlotAgeSteps is how many steps the ages of a capped room's active passes are told in.
const SlotAgeSteps = 8

// SlotsCountedEnough is how long the passes that end must have been counted for them to tell how
// long a pass holds its slot: a shorter count is of a room that was just capped.
const SlotsCountedEnough = 10 * time.Second

// SlotHold is how long a capped room's passes hold their slot.
type SlotHold struct {
	Duration time.Duration
	// Fixed says every pass holds it for exactly Duration (passes of a fixed ttl that nobody
	// releases), so that each active pass ends Duration after it began. Otherwise Duration is an
	// average over passes that end after holds of their own.
	Fixed bool
}

// Hold is how long a pass holds its slot. A pass of a fixed ttl that nobody releases holds it for
// its ttl; otherwise it is what the passes that ended held on average, at most longest, the most a
// pass can hold one (the ttl, or a sliding pass's maxSession). ok is false when that cannot be
// told yet: the passes were not counted for long enough, none was seen ending, or they were
// counted over less than two of their holds, when the passes that ended are the shorter ones.
func (s Slots) Hold(ttl, longest time.Duration, sliding bool) (SlotHold, bool) {
	switch {
	case s.Counted < SlotsCountedEnough || ttl <= 0:
		return SlotHold{}, false
	case !sliding && s.ReleasedPerSecond <= 0:
		return SlotHold{Duration: ttl, Fixed: true}, true
	case s.Held <= 0 || s.Counted < 2*s.Held:
		// Over less than two holds, only the shorter sessions have ended yet.
		return SlotHold{}, false
	}
	return SlotHold{Duration: min(s.Held, max(ttl, longest))}, true
}

// TimeFor is how long until n more admissions find a slot under the cap, from when the slots were
// counted, the passes holding their slots as hold says. The free slots take the first admissions at
// once; the active passes end evenly over the next hold, as the passes of a room long full do, or,
// when every pass holds its slot for the same time, each that time after it began, as its age
// tells; and every slot taken is free again a hold later. So after the first hold the cap admits
// Max a hold. Without a cap it is 0.
func (s Slots) TimeFor(n float64, h SlotHold) time.Duration {
	hold := h.Duration
	if s.Max <= 0 || hold <= 0 {
		return 0
	}
	active := float64(min(max(0, s.Active), s.Max))
	free := float64(s.Max) - active
	if n <= free {
		return 0
	}
	// The generations of the cap before the one that takes the n-th: rest is its place in that
	// one, from 1 to Max.
	m := n - free
	holds := math.Ceil(m/float64(s.Max)) - 1
	rest := m - holds*float64(s.Max)
	wait := time.Duration(holds * float64(hold))
	if rest <= active {
		wait += s.ended(rest/active, h)
	} else {
		// The free slots of the next hold, taken again as it begins.
		wait += hold
	}
	return wait
}

// Older is s d later: its active passes are d older. Those that ended meanwhile left their slots
// to visitors who were ahead, whom a place read now no longer counts, so the cap is taken as it
// was.
func (s Slots) Older(d time.Duration) Slots {
	if s.Ages[SlotAgeSteps] > 0 && d > 0 {
		for i := range s.Ages {
			s.Ages[i] += d
		}
	}
	return s
}

// ended is how long until the share of the active passes has ended.
func (s Slots) ended(share float64, h SlotHold) time.Duration {
	hold := h.Duration
	if !h.Fixed || s.Ages[SlotAgeSteps] <= 0 {
		// Passes whose holds differ end at any age: the old ones are as likely to be the long.
		return time.Duration(share * float64(hold))
	}
	// The passes end oldest first, each a hold after it began: once share of them has ended, the
	// oldest left is the one at 1 - share from the youngest.
	x := (1 - share) * SlotAgeSteps
	j := min(int(x), SlotAgeSteps-1)
	age := s.Ages[j] + time.Duration((x-float64(j))*float64(s.Ages[j+1]-s.Ages[j]))
	return min(hold, max(0, hold-age))
}

// slotWindow is how far back a SlotMeter counts the passes that end. It counts over the shortest
// recent stretch in which three times the cap ended, and at least minSlotsFreed: each slot then
// turned about three times, so the count is steady, spans the two holds Slots.Hold asks for, and
// follows a change in the workload's sessions within a few turns of the cap.
const (
	slotWindow    = 5 * time.Minute
	minSlotsFreed = 50
)

// SlotMeter measures, from a capped room's counters read now and then, how long its passes hold
// their slot.
type SlotMeter struct {
	samples []slotSample
}

type slotSample struct {
	at                         time.Time
	admitted, released, active int64
}

// Take takes in the room's counters at at: its admissions and releases ever, and its active passes.
func (m *SlotMeter) Take(at time.Time, admitted, released, active int64) {
	if k := len(m.samples); k > 0 {
		last := m.samples[k-1]
		if !at.After(last.at) {
			return
		}
		if admitted < last.admitted || released < last.released {
			// Counters that went back are of a Redis that lost them: count anew.
			m.samples = m.samples[:0]
		}
	}
	m.samples = append(m.samples, slotSample{at: at, admitted: admitted, released: released, active: active})
	// Twice the window, so that the ages of the passes active at its start can be read too.
	i := 0
	for i+1 < len(m.samples) && at.Sub(m.samples[i+1].at) >= 2*slotWindow {
		i++
	}
	m.samples = m.samples[i:]
}

// Slots is the room's slots under the cap maxActive, as of the last counters, with how long the
// passes that ended over the shortest recent stretch in which three times the cap ended (and
// minSlotsFreed), or over slotWindow, had held their slot.
//
// That is Little's law over a stretch from a to b: the slot time the passes used in it, plus the
// ages the passes active at a had then, less the ages of those active at b, is the sum of the holds
// of the passes that ended in it. The ages are read from when the room admitted, the oldest pass
// ending first. Without them a cap that just filled, whose passes are all young and end late,
// would read as holding its slots far longer than it does.
func (m *SlotMeter) Slots(maxActive int64) Slots {
	if len(m.samples) == 0 {
		return Slots{Max: maxActive}
	}
	k := len(m.samples) - 1
	last := m.samples[k]
	s := Slots{Max: maxActive, Active: last.active}
	if active := min(last.active, last.admitted); active > 0 {
		for j := range s.Ages {
			admittedAt := m.admittedAt(float64(last.admitted) - float64(active)*float64(j)/SlotAgeSteps)
			s.Ages[j] = max(0, last.at.Sub(m.samples[0].at)-time.Duration(admittedAt*float64(time.Second)))
		}
	}
	i := k
	var freed int64
	for i > 0 && last.at.Sub(m.samples[i-1].at) <= slotWindow {
		i--
		freed = (last.admitted - m.samples[i].admitted) - (last.active - m.samples[i].active)
		if freed >= max(minSlotsFreed, 3*maxActive) && last.at.Sub(m.samples[i].at) >= SlotsCountedEnough {
			break
		}
	}
	if i == k {
		return s
	}
	first := m.samples[i]
	s.Counted = last.at.Sub(first.at)
	s.ReleasedPerSecond = float64(last.released-first.released) / s.Counted.Seconds()
	if freed <= 0 {
		return s
	}
	used := 0.0
	for j := i; j < k; j++ {
		used += float64(m.samples[j].active+m.samples[j+1].active) / 2 * m.samples[j+1].at.Sub(m.samples[j].at).Seconds()
	}
	if held := (used + m.ages(i) - m.ages(k)) / float64(freed); held > 0 {
		s.Held = time.Duration(held * float64(time.Second))
	}
	return s
}

// admittedAt is when the room admitted its x-th visitor ever, in seconds after the first sample
// kept, as its counters tell: linearly between two reads, and at the first for one before it.
func (m *SlotMeter) admittedAt(x float64) float64 {
	for j := 0; j+1 < len(m.samples); j++ {
		a, b := m.samples[j], m.samples[j+1]
		if x <= float64(b.admitted) && b.admitted > a.admitted {
			share := math.Max(0, x-float64(a.admitted)) / float64(b.admitted-a.admitted)
			return a.at.Sub(m.samples[0].at).Seconds() + share*b.at.Sub(a.at).Seconds()
		}
	}
	if x <= float64(m.samples[0].admitted) {
		return 0
	}
	return m.samples[len(m.samples)-1].at.Sub(m.samples[0].at).Seconds()
}

// ages is the sum of the ages, in seconds, of the passes active at sample i: its last admissions,
// each admitted when the counters say (no earlier than the first sample kept).
func (m *SlotMeter) ages(i int) float64 {
	at := m.samples[i]
	lo, hi := float64(at.admitted-min(at.active, at.admitted)), float64(at.admitted)
	// The sum of the admission times of admissions lo to hi, in seconds after the first sample:
	// before the first sample they count as at it, then linearly between samples.
	var sum float64
	for j := 0; j < i; j++ {
		a, b := m.samples[j], m.samples[j+1]
		from, to := math.Max(lo, float64(a.admitted)), math.Min(hi, float64(b.admitted))
		if to <= from {
			continue
		}
		mid := (from + to) / 2
		t := a.at.Sub(m.samples[0].at).Seconds() + (mid-float64(a.admitted))/float64(b.admitted-a.admitted)*b.at.Sub(a.at).Seconds()
		sum += (to - from) * t
	}
	return (hi-lo)*at.at.Sub(m.samples[0].at).Seconds() - sum
}
