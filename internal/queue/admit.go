package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/capacity"
)

// DefaultFrontBudget is how many silent visitors one Admit call may drop at the front beyond its batch.
const DefaultFrontBudget = 128

// DefaultSweepBlocks is how many blocks of last-seen records (seenBlock visitors each) one Admit call
// sweeps deeper in the queue. At 10 ticks per second that walks 1,200 visitors per second.
const DefaultSweepBlocks = 12

// MaxAdmitPerTick is the most visitors one Admit call admits (capacity.MaxAdmitPerTick).
const MaxAdmitPerTick = capacity.MaxAdmitPerTick

// jitterModulus is the modulus of the Park–Miller generator that draws jitter offsets (2^31 − 1).
const jitterModulus = 2147483647

// AdmitRequest is one scheduler tick.
type AdmitRequest struct {
	// TickID identifies the tick and must grow from tick to tick (the scheduler uses the tick's
	// scheduled time in Unix milliseconds). A call whose TickID is not above the last one admits
	// nobody, so a retry after a lost reply, or a second scheduler, cannot admit a tick twice.
	TickID int64
	// Limit is the most visitors the call admits, 0 to MaxAdmitPerTick.
	Limit int
	// Window spreads the admitted visitors' not-before times: the window is cut into one slot per
	// visitor admitted, earliest first, and each falls at a random point of its own slot (see
	// JitterOffsets). Zero makes every pass of the tick valid at once. Millisecond precision.
	Window time.Duration
	// Lead puts every not-before time this far after Redis' now, before the jitter offset.
	Lead time.Duration
	// Seed draws the jitter offsets; any value works, the same seed gives the same offsets.
	Seed int64
	// InstantBudget is the most visitors Enter may admit at once, while nobody waits, until the next
	// call replaces it: out of what the call leaves of Limit unused, so that a tick and the instant
	// admissions after it never pass the tick's quota together. 0 admits nobody at once.
	InstantBudget int
	// Tick is the scheduler's tick; the budget lapses a second after it, should no tick follow.
	Tick time.Duration
	// MaxActive, when positive, caps the active passes (admitted, not expired, not released): the
	// call admits at most MaxActive minus the active ones.
	MaxActive int64
	// PassTTL is how long a pass stays valid after its not-before time.
	PassTTL time.Duration
	// AbandonAfter is how long a waiting visitor may stay silent; AbandonAtTurnAfter, when positive
	// and shorter, how long it may have been silent when the tick takes its place off the front.
	AbandonAfter, AbandonAtTurnAfter time.Duration
	// FrontBudget bounds the silent visitors one call may drop at the front beyond its limit;
	// 0 means DefaultFrontBudget.
	FrontBudget int
	// SweepBlocks is how many blocks of last-seen records one call sweeps for silent visitors deeper
	// in the queue; 0 means DefaultSweepBlocks.
	SweepBlocks int
	// Holding, while the pre-queue is drawn, admits only arrivals up to Through (DrawState.Settled):
	// the visitors behind the part of the pre-queue already placed wait for the rest of it.
	Holding bool
	Through int64
	// Primary is the replication id of the server the last call ran on (AdmitResult.Primary), ""
	// when unknown. A call that finds another primary admits nobody (AdmitResult.FailedOver): a
	// client that followed a failover within the call (its retries reached a promoted replica) would
	// otherwise admit visitors there before the proxies wrote back the passes the failover lost.
	Primary string
	// SleepFor, when positive, lets the room sleep that long if the call leaves nobody waiting and
	// an instant budget: the budget then lasts SleepFor (and a second) instead of Tick, and the
	// first visitor Enter gives a place wakes the scheduler through the wake channel (Wakes). Not
	// with Holding. While the room sleeps, Enter refills the budget to SleepShare (under MaxActive)
	// for each tick past the one it came from, as the ticks it skips would have: a whole number of
	// visitors no tick's share falls below (the plan's per-tick quota, rounded down).
	SleepFor   time.Duration
	SleepShare int
	// Lanes are the room's lanes (SetLanes) with their percentages of the batch; the main queue takes
	// the rest. Limit is shared between them, credits carrying each lane's fraction of a visitor
	// from tick to tick, and a lane with nobody waiting leaves its share to the others (admit.lua).
	Lanes []LaneShare
	// QuietAfter, when positive, counts the places taken off a front whose visitor was silent that
	// long as gone quiet (FrontMove.Quiet), dropped or not: well under AbandonAfter, and above the
	// longest a visitor polling as told is silent near the front.
	QuietAfter time.Duration
}

// jitterSeed maps any seed onto the generator's state space, 1 … 2^31 − 2.
func jitterSeed(seed int64) int64 {
	return 1 + int64(uint64(seed)%(jitterModulus-1))
}

// JitterOffsets returns the offsets from now + lead that one Admit call with this seed and window
// gives the n visitors it admits, front of the queue first. The window, in whole milliseconds W, is
// cut into n slots [⌊i·W/n⌋, ⌊(i+1)·W/n⌋) and visitor i falls within slot i, at a point drawn from a
// Park–Miller generator: every offset is uniform over the window in the long run, and one tick
// reaches the workload as an even stream, never as a clump that independent draws now and then make.
// The admit script computes the same numbers; a test holds the two together.
func JitterOffsets(seed int64, n int, window time.Duration) []time.Duration {
	offsets := make([]time.Duration, n)
	w := window.Milliseconds()
	x := jitterSeed(seed)
	for i := range n {
		x = x * 48271 % jitterModulus
		lo := int64(i) * w / int64(n)
		off := lo
		if width := int64(i+1)*w/int64(n) - lo; width > 0 {
			off = lo + x%width
		}
		offsets[i] = time.Duration(off) * time.Millisecond
	}
	return offsets
}

// AdmittedVisitor is one admission of a tick.
type AdmittedVisitor struct {
	ID   string
	Pass Pass
	// Arrival is the visitor's place in the arrival sequence (see AdmitResult.Sequence); a visitor of
	// a drawn pre-queue has the place the draw gave it.
	Arrival int64
}

// AdmitResult is what one tick did.
type AdmitResult struct {
	// Duplicate is true when the TickID was not above the last one: nothing was done.
	Duplicate bool
	// Admitted are the visitors admitted, front of the queue first.
	Admitted []AdmittedVisitor
	// Abandoned is how many silent visitors were dropped.
	Abandoned int64
	// Now is Redis' clock during the tick.
	Now time.Time
	// Asleep: the call left nobody waiting and the room sleeps (AdmitRequest.SleepFor).
	Asleep bool
	// Sequence is the last arrival given out as of Now: everyone who entered by then has an arrival up
	// to it, so the sequences of successive ticks tell when a visitor entered.
	Sequence int64
	// Primary is the replication id of the server the call ran on ("" when it does not say): the
	// next call's AdmitRequest.Primary.
	Primary string
	// FailedOver says that the call found another primary than AdmitRequest.Primary, and did
	// nothing: a failover, which the scheduler pauses the room for (docs/guides/redis.md).
	FailedOver bool
	// Fronts tell how the front of each of the room's queues moved: the main queue's first, then
	// the lanes' in the order of AdmitRequest.Lanes.
	Fronts []FrontMove
}

// FrontMove is what one tick did at the front of one queue (capacity.FrontMeter takes it in).
type FrontMove struct {
	// Head is the arrival at the queue's front when the tick began to take from it; -1 when it took
	// nobody from it.
	Head int64
	// Admitted is how many the tick admitted from the queue.
	Admitted int64
	// Emptied says the tick took the queue's last place.
	Emptied bool
	// Depth is the places left in the queue after the tick.
	Depth int64
	// Taken is the places the tick took off the front, admitted or dropped for silence; Quiet how
	// many of them had gone quiet (AdmitRequest.QuietAfter), and QuietPlaces a few of those.
	Taken, Quiet int64
	QuietPlaces  []QuietPlace
}

// QuietPlace is a place taken off a front whose visitor had gone quiet: its arrival, and how long
// its visitor had been silent.
type QuietPlace struct {
	Arrival int64
	Silence time.Duration
}

// Admit runs one tick atomically: it drops silent visitors it meets at the front, admits up to
// Limit visitors in arrival order, and sweeps a bounded stretch of the queue for silent ones: one
// call examines at most Limit + FrontBudget visitors at the front and SweepBlocks × seenBlock deeper
// in, so its work never depends on the plan that chose the limit.
func (q *Queue) Admit(ctx context.Context, req AdmitRequest) (AdmitResult, error) {
	keys, args, err := q.admitCall(req)
	if err != nil {
		return AdmitResult{}, err
	}
	raw, err := admitScript.Run(ctx, q.rdb, keys, args...).Slice()
	if err != nil {
		return AdmitResult{}, fmt.Errorf("admitting from queue %s: %w", q.prefix, err)
	}
	res, err := parseAdmitReply(raw)
	if err == nil && len(res.Admitted) > 0 {
		q.replicate(ctx)
	}
	return res, err
}

// admitCall checks req and turns it into the admit script's keys and arguments.
func (q *Queue) admitCall(req AdmitRequest) (keys []string, args []any, err error) {
	switch {
	case req.TickID <= 0:
		return nil, nil, errors.New("admit: tick id must be positive")
	case req.PassTTL <= 0:
		return nil, nil, errors.New("admit: pass TTL must be positive")
	case req.Limit < 0 || req.Limit > MaxAdmitPerTick:
		return nil, nil, fmt.Errorf("admit: limit %d is outside 0 … %d", req.Limit, MaxAdmitPerTick)
	case req.Window < 0 || req.Lead < 0:
		return nil, nil, fmt.Errorf("admit: negative window %s or lead %s", req.Window, req.Lead)
	case req.InstantBudget < 0 || req.InstantBudget > req.Limit || (req.InstantBudget > 0 && req.Tick <= 0):
		return nil, nil, fmt.Errorf("admit: instant budget %d is outside 0 … limit %d, or lasts %s", req.InstantBudget, req.Limit, req.Tick)
	case req.FrontBudget < 0 || req.SweepBlocks < 0:
		return nil, nil, fmt.Errorf("admit: negative front budget %d or sweep blocks %d", req.FrontBudget, req.SweepBlocks)
	case req.SleepFor < 0 || (req.SleepFor > 0 && req.Holding) || req.SleepShare < 0 || req.SleepShare > req.Limit:
		return nil, nil, fmt.Errorf("admit: sleep for %s with a share of %d (limit %d), holding %t", req.SleepFor, req.SleepShare, req.Limit, req.Holding)
	}
	if err := validShares(req.Lanes); err != nil {
		return nil, nil, fmt.Errorf("admit: %w", err)
	}
	front, blocks := cmp.Or(req.FrontBudget, DefaultFrontBudget), cmp.Or(req.SweepBlocks, DefaultSweepBlocks)
	args = []any{
		req.TickID, req.PassTTL.Milliseconds(), req.AbandonAfter.Milliseconds(), front, blocks,
		req.Limit, req.Window.Milliseconds(), req.Lead.Milliseconds(), jitterSeed(req.Seed),
		req.InstantBudget, req.Tick.Milliseconds(), max(0, req.MaxActive), int64(-1), req.SleepFor.Milliseconds(), req.SleepShare,
		req.Primary, laneArg(req.Lanes), max(0, req.QuietAfter.Milliseconds()), max(0, req.AbandonAtTurnAfter.Milliseconds()),
	}
	if req.Holding {
		args[12] = max(0, req.Through)
	}
	keys = []string{q.keys.wait, q.keys.active, q.keys.totals, q.keys.seq, q.keys.revoked, q.keys.seen, q.keys.passes, q.keys.shadow, q.keys.plan, q.keys.shadowLanes}
	for _, l := range req.Lanes {
		keys = append(keys, q.laneKey(l.Name))
	}
	return keys, args, nil
}

// parseAdmitReply reads the admit script's reply.
func parseAdmitReply(raw []any) (AdmitResult, error) {
	if len(raw) < 3 {
		return AdmitResult{}, fmt.Errorf("unexpected admit reply %v", raw)
	}
	done, _ := raw[0].(int64)
	now, _ := raw[1].(int64)
	res := AdmitResult{Now: time.UnixMilli(now)}
	switch done {
	case 0:
		res.Duplicate = true
		if len(raw) > 3 {
			res.Primary, _ = raw[3].(string)
		}
		return res, nil
	case 2:
		res.FailedOver = true
		res.Primary, _ = raw[2].(string)
		return res, nil
	}
	if len(raw) < 6 {
		return AdmitResult{}, fmt.Errorf("unexpected admit reply %v", raw)
	}
	res.Abandoned, _ = raw[2].(int64)
	asleep, _ := raw[3].(int64)
	res.Asleep = asleep == 1
	res.Sequence, _ = raw[4].(int64)
	res.Primary, _ = raw[5].(string)
	if len(raw) < 7 {
		return AdmitResult{}, fmt.Errorf("unexpected admit reply %v", raw)
	}
	fronts, _ := raw[6].(string)
	var err error
	if res.Fronts, err = parseFronts(fronts); err != nil {
		return AdmitResult{}, err
	}
	rest := raw[7:]
	if len(rest)%4 != 0 {
		return AdmitResult{}, fmt.Errorf("unexpected admit reply %v", raw)
	}
	res.Admitted = make([]AdmittedVisitor, 0, len(rest)/4)
	for i := 0; i < len(rest); i += 4 {
		id, _ := rest[i].(string)
		nb, _ := rest[i+1].(int64)
		exp, _ := rest[i+2].(int64)
		arrival, _ := rest[i+3].(int64)
		res.Admitted = append(res.Admitted, AdmittedVisitor{ID: id, Pass: Pass{time.UnixMilli(nb), time.UnixMilli(exp)}, Arrival: arrival})
	}
	return res, nil
}

// parseFronts reads the admit script's fronts, one for each queue separated by spaces:
// "head:admitted:emptied:depth:taken:quiet:samples", samples being "arrival/silenceMs" separated by
// commas, or "-".
func parseFronts(s string) ([]FrontMove, error) {
	fields := strings.Fields(s)
	out := make([]FrontMove, 0, len(fields))
	for _, f := range fields {
		parts := strings.Split(f, ":")
		if len(parts) != 7 {
			return nil, fmt.Errorf("unexpected front %q in the admit reply", f)
		}
		var nums [5]int64
		for i, k := range []int{0, 1, 3, 4, 5} {
			n, err := strconv.ParseInt(parts[k], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("unexpected front %q in the admit reply", f)
			}
			nums[i] = n
		}
		move := FrontMove{Head: nums[0], Admitted: nums[1], Emptied: parts[2] == "1", Depth: nums[2], Taken: nums[3], Quiet: nums[4]}
		if parts[6] != "-" {
			for _, sample := range strings.Split(parts[6], ",") {
				arrival, silence, ok := strings.Cut(sample, "/")
				a, err1 := strconv.ParseInt(arrival, 10, 64)
				ms, err2 := strconv.ParseInt(silence, 10, 64)
				if !ok || err1 != nil || err2 != nil {
					return nil, fmt.Errorf("unexpected front %q in the admit reply", f)
				}
				move.QuietPlaces = append(move.QuietPlaces, QuietPlace{Arrival: a, Silence: time.Duration(ms) * time.Millisecond})
			}
		}
		out = append(out, move)
	}
	return out, nil
}

// LastTick is the TickID of the last tick the queue ran (the scheduler's grid point in Unix
// milliseconds), or 0 when it never ran one, or its Redis lost it.
func (q *Queue) LastTick(ctx context.Context) (int64, error) {
	last, err := q.rdb.HGet(ctx, q.keys.totals, "tick").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the last tick of queue %s: %w", q.prefix, err)
	}
	return last, nil
}
