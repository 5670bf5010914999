// Package queue is herdgate's engine on Redis: visitors enter a strict FIFO queue, poll for their
// position, and are admitted a batch per scheduler tick with a signed-pass record whose not-before
// time carries the tick's jitter. The admission proxy and the scheduler reach Redis only through it.
//
// Every key of one queue shares the hash tag {hg:<namespace>/<name>}, so each script touches one slot
// and the engine runs unchanged on one server, over TLS, and on Redis Cluster:
//
//	{hg:ns/name}:q        sorted set: waiting visitors, scored by arrival sequence
//	{hg:ns/name}:q:<lane> sorted set: the visitors waiting in a lane (lanes.go), scored likewise
//	{hg:ns/name}:lc:<id>  set: the visitors a lane's code of several uses entered, until it expires
//	{hg:ns/name}:shadow   sorted set: shadow places (spec.entry.shadowQueue), which no tick admits
//	{hg:ns/name}:shadowlanes hash: the lane a shadow place reads as, by visitor (none: the main queue)
//	{hg:ns/name}:seq      arrival sequence (INCR)
//	{hg:ns/name}:seen     hash: last-seen times of the waiting, ten arrivals to a field (common.lua)
//	{hg:ns/name}:passes   hash: pass records "notBeforeMs:expiryMs" by visitor, dropped after expiry
//	{hg:ns/name}:a        sorted set: admitted visitors, scored by pass expiry
//	{hg:ns/name}:t        hash: admitted and abandoned totals, last tick id, sweep cursor
//	{hg:ns/name}:plan     hash: the plan the scheduler publishes for the proxies
//	{hg:ns/name}:proxies  hash: each proxy replica's report of the config it serves
//	{hg:ns/name}:workload hash: each proxy replica's running totals of the protected requests
//	{hg:ns/name}:used:<s> HyperLogLog: passes of not-before second s that were used, expiring
//	{hg:ns/name}:rev      sorted set: released passes not expired yet, scored by revocation sequence
//	{hg:ns/name}:revseq   the revocation sequence (INCR)
//	{hg:ns/name}:pre      sorted set: pre-queue places of a scheduled opening, scored by arrival sequence
//	{hg:ns/name}:prelanes hash: the lane a pre-queue place joins at the draw, by visitor (lanes.go)
//	{hg:ns/name}:draw     hash: how far the draw of the pre-queue went
//	{hg:ns/name}:drawn    list: the draw's record, "arrival place" per visitor placed
package queue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/phase"
)

// MaxVisitorIDLength is the longest visitor ID the engine accepts.
const MaxVisitorIDLength = 128

// seenBlock is how many consecutive arrivals share one field of the last-seen hash, seenSlot
// characters each (SEEN_BLOCK and SLOT in the scripts, which fix them). Ten lets a script take the
// field and the slot from the digits of the arrival sequence instead of computing and formatting
// them; a field holds a block's times side by side, so that the hash costs a few bytes a visitor
// (docs/performance.md has the counts).
const (
	seenBlock = 10
	seenSlot  = 13
)

var (
	//go:embed lua/common.lua
	commonLua string
	//go:embed lua/enter.lua
	enterLua string
	//go:embed lua/status.lua
	statusLua string
	//go:embed lua/admit.lua
	admitLua string
	//go:embed lua/stats.lua
	statsLua string
	//go:embed lua/draw.lua
	drawLua string
	//go:embed lua/plan.lua
	planLua string

	// redis.Script runs EVALSHA and falls back to EVAL (which loads the script) on NOSCRIPT, so the
	// scripts survive SCRIPT FLUSH, a restart and a failover.
	enterScript  = newScript("local WAKE_CHANNEL = '" + WakeChannel + "'\n" + enterLua)
	statusScript = newScript(statusLua)
	admitScript  = newScript(admitLua)
	statsScript  = newScript(statsLua)
	drawScript   = newScript(drawLua)
	planScript   = newScript(planLua)
)

// ErrInvalidVisitor is returned for a visitor ID the engine refuses to store.
var ErrInvalidVisitor = errors.New("invalid visitor ID")

// Queue is the Redis state of one WaitingQueue. It is safe for concurrent use.
type Queue struct {
	rdb             redis.UniversalClient
	store           *Store // batches Enter and Status when set
	prefix          string // "{hg:<namespace>/<name>}"
	namespace, name string
	keys            struct{ wait, seq, active, totals, plan, proxies, workload, revoked, revokedSeq, pre, preLanes, draw, drawn, seen, passes, shadow, shadowLanes string }
	// highestSeq is the highest arrival sequence an answer named (sawSeq); beforeFailover the highest
	// named before the last failover the store's watch saw, noticed at failoverNoticed (Unix ms), and
	// failoverEpoch that failover's epoch (noteFailover).
	highestSeq, beforeFailover, failoverNoticed, failoverEpoch atomic.Int64
	// durability is the queue's durability (SetReplicated).
	durability durability
	// lanes are the room's lanes (SetLanes).
	lanes lanes
}

// New returns the queue namespace/name stored in rdb, sending each call on its own. Store.Queue
// returns one that batches concurrent polls.
func New(rdb redis.UniversalClient, namespace, name string) (*Queue, error) {
	for field, v := range map[string]string{"namespace": namespace, "name": name} {
		if v == "" || strings.ContainsAny(v, "{}/*?[]\\ ") {
			return nil, fmt.Errorf("queue %s %q is empty or holds a character reserved in key names", field, v)
		}
	}
	q := &Queue{rdb: rdb, namespace: namespace, name: name, prefix: "{hg:" + namespace + "/" + name + "}"}
	q.keys.wait = q.prefix + ":q"
	q.keys.seq = q.prefix + ":seq"
	q.keys.active = q.prefix + ":a"
	q.keys.totals = q.prefix + ":t"
	q.keys.plan = q.prefix + ":plan"
	q.keys.proxies = q.prefix + ":proxies"
	q.keys.workload = q.prefix + ":workload"
	q.keys.revoked = q.prefix + ":rev"
	q.keys.revokedSeq = q.prefix + ":revseq"
	q.keys.pre = q.prefix + ":pre"
	q.keys.preLanes = q.prefix + ":prelanes"
	q.keys.draw = q.prefix + ":draw"
	q.keys.drawn = q.prefix + ":drawn"
	q.keys.seen = q.prefix + ":seen"
	q.keys.passes = q.prefix + ":passes"
	q.keys.shadow = q.prefix + ":shadow"
	q.keys.shadowLanes = q.prefix + ":shadowlanes"
	return q, nil
}

// Namespace and Name name the queue's WaitingQueue.
func (q *Queue) Namespace() string { return q.namespace }

// Name is the queue's WaitingQueue name.
func (q *Queue) Name() string { return q.name }

// KeyPrefix is the prefix (hash tag included) of every key of this queue.
func (q *Queue) KeyPrefix() string { return q.prefix }

// ValidateVisitorID checks that id is 1 to 128 printable ASCII characters.
func ValidateVisitorID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidVisitor)
	}
	if len(id) > MaxVisitorIDLength {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrInvalidVisitor, len(id), MaxVisitorIDLength)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is 0x%02x, only printable ASCII is allowed", ErrInvalidVisitor, i, c)
		}
	}
	return nil
}

// Pass is the validity window of an admitted visitor's pass.
type Pass struct {
	NotBefore time.Time
	Expiry    time.Time
}

// State is where a visitor stands.
type State int

const (
	// NotQueued: the visitor never entered, or lost its place (abandoned), or its pass expired.
	NotQueued State = iota
	// Admitted: the visitor holds a pass that has not expired (it may not be valid yet).
	Admitted
	// Waiting: the visitor is in the queue.
	Waiting
	// TurnedAway: the room takes no new visitor in its phase (Scheduled, or Closed); Position.Phase
	// says which. Only Enter answers it.
	TurnedAway
	// PreQueued: the visitor holds a pre-queue place, which has no position until the draw at
	// opening; Position.Arrival is its arrival number and Depth the pre-queue's length.
	PreQueued
	// Drawing: the room is opening and the draw has not settled the visitor's place yet.
	Drawing
	// RateLimited: the visitor's client took its burst of places and has not earned another yet;
	// Position.RetryAfter says when it will. Only EnterFrom answers it, and nothing was taken.
	RateLimited
	// TokenSpent: a single-use token of the entry (EntryLimit.SingleUse) entered another visitor
	// already; Position.Token is its index. Only EnterFrom answers it, and nothing was taken.
	TokenSpent
)

// SingleUse is a token that enters one visitor only: the first that presents it, until Until. ID
// names it in Redis (lower-case hex, such as a hash of the token; at most 64 characters). With Uses
// above one it enters that many visitors (a lane's code of several uses), each as often as it likes.
type SingleUse struct {
	ID    string
	Until time.Time
	Uses  int
}

// EntryLimit bounds the places one client takes: a token bucket of Burst places per Client that
// refills at PerMinute, kept in Redis beside the queue, so every proxy replica shares it. Only a new
// place (or a pass given at once) takes a token: a visitor who already holds one keeps it.
type EntryLimit struct {
	// Client names the client, e.g. its address prefix "203.0.113.7/32"; empty means no limit.
	Client string
	// Burst is how many places a client takes at once; PerMinute how many it earns back a minute.
	Burst, PerMinute int
	// SingleUse are the entry's single-use tokens (an invitation, a proof of work): checked and
	// bound to the visitor in the same call, whether or not a client limit applies.
	SingleUse []SingleUse
	// HeldPlace is the arrival sequence of the signed place the visitor brings back (0: none). A
	// visitor the queue does not know re-enters at it when a failover lost that place, and at the
	// back otherwise (docs/guides/redis.md).
	HeldPlace int64
	// OnlyHeldPlace asks for the held place back and nothing else: a visitor not given it is
	// NotQueued, and takes no new place (a status poll's way to come back).
	OnlyHeldPlace bool
	// HeldLane is the lane the held place was in ("" for the main queue): the place comes back
	// there, or to the main queue when the room has the lane no more.
	HeldLane string
	// Lane is the lane (SetLanes) the visitor joins when it takes a new place while the room is
	// open; "" (or a lane the room does not have) is the main queue. A visitor keeps the lane it
	// took its place in.
	Lane string
	// Shadow gives the visitor a shadow place (spec.entry.shadowQueue) if it takes a new one: a
	// place no tick admits, which reads as one behind everyone waiting.
	Shadow bool
	// ShadowFactor, when positive, gives a client that asks for ShadowFactor × Burst places before
	// its bucket refills shadow places for its further asks, instead of refusing them.
	ShadowFactor int
}

func (l EntryLimit) active() bool { return l.Client != "" && l.Burst > 0 && l.PerMinute > 0 }

func (s State) String() string {
	switch s {
	case NotQueued:
		return "NotQueued"
	case Admitted:
		return "Admitted"
	case Waiting:
		return "Waiting"
	case TurnedAway:
		return "TurnedAway"
	case PreQueued:
		return "PreQueued"
	case Drawing:
		return "Drawing"
	case RateLimited:
		return "RateLimited"
	case TokenSpent:
		return "TokenSpent"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Position is a visitor's answer from Enter or Status.
type Position struct {
	State State
	// Position is the 1-based place in the queue and Depth the queue's length, when Waiting; while
	// the pre-queue is drawn, Depth counts the part not placed yet.
	Position, Depth int64
	// Arrival is the visitor's arrival number when PreQueued: what its drawn place is computed from.
	Arrival int64
	// Seq is the waiting visitor's arrival sequence, its key in the queue: what a RankSnapshot bounds
	// its position from, and what SeenBatch records its signs of life by.
	Seq int64
	// Phase is the room's phase when NotQueued or TurnedAway.
	Phase phase.Phase
	// Pass is set when Admitted.
	Pass Pass
	// Now is Redis' clock when it answered.
	Now time.Time
	// RetryAfter is how long until the visitor's client earns a place again, when RateLimited.
	RetryAfter time.Duration
	// Token is the index in EntryLimit.SingleUse of the token another visitor spent, when TokenSpent.
	Token int
	// PreviousPoll is when the visitor last entered or polled before this Status call, when Waiting;
	// zero when unknown. The proxy refuses polls that come sooner than it allowed. Also set when
	// PreQueued or Drawing.
	PreviousPoll time.Time
	// Restored says that the visitor, Waiting, re-entered at the place it held before a failover
	// lost it (EntryLimit.HeldPlace).
	Restored bool
	// Front is the arrival at the front of the visitor's queue (its lane's), when Waiting: the
	// arrivals from it to Seq are what the visitor waits behind; 0 when unknown.
	Front int64
	// Lane is the lane the visitor waits in, when Waiting: "" for the main queue. Position and
	// Depth are then its place in the lane and the lane's length. When PreQueued it is the lane the
	// draw places the visitor in.
	Lane string
	// Shadow says the visitor holds a shadow place, when Waiting: one no tick admits. It reads as a
	// place behind everyone waiting in the queue the visitor would have joined: Lane names it, and
	// Position and Depth count that queue's places and the shadow set's.
	Shadow bool
}

// restoredCode is the enter script's reply code for a visitor given its lost place back: Waiting,
// with Restored set.
const restoredCode = 8

// Enter puts the visitor at the back of the queue. A visitor already waiting keeps its place, and one
// holding an unexpired pass keeps it (Admitted). A waiting visitor silent for longer than abandonAfter
// has lost its place and starts again at the back. While nobody waits and the last tick left part of
// its quota unused (AdmitRequest.InstantBudget), a new visitor is admitted at once: Admitted, with a
// pass valid now. The published phase changes what a new visitor gets: a pre-queue place
// (PreQueued) in PhasePreQueue, a place behind the pre-queue (Drawing) in PhaseOpening, nothing
// (TurnedAway) in PhaseScheduled and PhaseClosed.
func (q *Queue) Enter(ctx context.Context, visitor string, abandonAfter time.Duration) (Position, error) {
	return q.EnterFrom(ctx, visitor, abandonAfter, EntryLimit{})
}

// EnterFrom is Enter for a visitor whose client limit bounds the places it takes: a new place when the
// client has no token left is RateLimited, in the same call to Redis.
func (q *Queue) EnterFrom(ctx context.Context, visitor string, abandonAfter time.Duration, limit EntryLimit) (Position, error) {
	if limit.active() && !validClient(limit.Client) {
		return Position{}, fmt.Errorf("entering queue %s: client %q is not an address prefix", q.prefix, limit.Client)
	}
	for _, t := range limit.SingleUse {
		if !validTokenID(t.ID) {
			return Position{}, fmt.Errorf("entering queue %s: single-use token %q is not lower-case hex of at most 64 characters", q.prefix, t.ID)
		}
	}
	p, err := q.visitorCall(ctx, opEnter, visitor, abandonAfter, limit)
	if err != nil {
		return Position{}, fmt.Errorf("entering queue %s: %w", q.prefix, err)
	}
	return p, nil
}

// Status tells where the visitor stands and refreshes its last-seen time. A visitor never queued, or
// dropped for silence, is NotQueued: not an error.
func (q *Queue) Status(ctx context.Context, visitor string, abandonAfter time.Duration) (Position, error) {
	p, err := q.visitorCall(ctx, opStatus, visitor, abandonAfter, EntryLimit{})
	if err != nil {
		return Position{}, fmt.Errorf("reading status in queue %s: %w", q.prefix, err)
	}
	return p, nil
}

// visitorOp is a script that handles a list of visitors of one queue.
type visitorOp int

const (
	opEnter visitorOp = iota
	opStatus
)

func (o visitorOp) script() *redis.Script {
	if o == opEnter {
		return enterScript
	}
	return statusScript
}

// keysFor is the script's keys: the queue's, and for enter those of the entries' clients and
// single-use tokens, which the script may touch and so declares.
func (q *Queue) keysFor(o visitorOp, lanes []string, entries []entryArg) []string {
	if o != opEnter {
		return append([]string{q.keys.wait, q.keys.totals, q.keys.plan, q.keys.pre, q.keys.draw, q.keys.seen, q.keys.passes, q.keys.shadow, q.keys.preLanes, q.keys.shadowLanes}, q.laneKeys(lanes)...)
	}
	keys := []string{q.keys.wait, q.keys.seq, q.keys.totals, q.keys.active, q.keys.plan, q.keys.pre, q.keys.draw, q.keys.seen, q.keys.passes, q.keys.shadow, q.keys.preLanes, q.keys.shadowLanes}
	keys = append(keys, q.laneKeys(lanes)...)
	var clients map[string]bool // a batch often carries one client many times: declare it once
	for _, e := range entries {
		if e.client != "" && !clients[e.client] {
			if clients == nil {
				clients = map[string]bool{}
			}
			clients[e.client] = true
			keys = append(keys, q.prefix+":c:"+e.client)
		}
		for i, id := range e.tokenIDs {
			if e.counted[i] {
				keys = append(keys, q.prefix+":lc:"+id)
			} else {
				keys = append(keys, q.prefix+":u:"+id)
			}
		}
	}
	return keys
}

// entryArg is what an enter call sends for one visitor besides its name: its client ("" when
// unlimited), its single-use tokens ("" when none; tokenIDs their IDs, for the keys, and counted
// which of them enter several visitors), the place it held before a failover ("" when none) and the
// lane it joins.
type entryArg struct {
	client, tokens, held, heldLane, lane string
	shadow                               bool
	tokenIDs                             []string
	counted                              []bool
}

func entryArgOf(limit EntryLimit) entryArg {
	a := entryArg{client: limit.Client, tokens: tokenArg(limit.SingleUse), lane: limit.Lane, heldLane: limit.HeldLane, shadow: limit.Shadow}
	for _, t := range limit.SingleUse {
		a.tokenIDs = append(a.tokenIDs, t.ID)
		a.counted = append(a.counted, t.Uses > 1)
	}
	if limit.HeldPlace > 0 {
		a.held = strconv.FormatInt(limit.HeldPlace, 10)
		if limit.OnlyHeldPlace {
			a.held = "=" + a.held
		}
	}
	return a
}

// argsFor is the script's arguments: for status the visitors, for enter the entry limit, the
// highest arrival sequence seen, the old primary's after a failover, and each visitor with its
// entryArg (all empty when entries is nil).
func (q *Queue) argsFor(o visitorOp, abandon int64, limit EntryLimit, lanes, visitors []string, entries []entryArg) []any {
	if o != opEnter {
		args := make([]any, 0, 1+len(visitors))
		args = append(args, abandon)
		for _, v := range visitors {
			args = append(args, v)
		}
		return args
	}
	args := make([]any, 0, 8+5*len(visitors))
	args = append(args, q.prefix, abandon, limit.Burst, limit.PerMinute, q.highestSeq.Load(), q.oldPrimarysSeq(abandon), len(lanes), limit.ShadowFactor)
	for i, v := range visitors {
		var e entryArg
		if entries != nil {
			e = entries[i]
		}
		lane := laneIndex(lanes, e.lane)
		if e.shadow {
			// A shadow place reads as one of the queue the visitor would have joined.
			lane = -1 - lane
		}
		held := e.held
		if i := laneIndex(lanes, e.heldLane); held != "" && i > 0 {
			held += "@" + strconv.Itoa(i)
		}
		args = append(args, v, e.client, e.tokens, held, lane)
	}
	return args
}

// tokenArg is the script's form of an entry's single-use tokens: "id:untilMs" separated by spaces.
func tokenArg(tokens []SingleUse) string {
	if len(tokens) == 0 {
		return ""
	}
	var b strings.Builder
	for i, t := range tokens {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.ID)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(t.Until.UnixMilli(), 10))
		if t.Uses > 1 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(t.Uses))
		}
	}
	return b.String()
}

// validTokenID: a token ID is lower-case hex, so that nothing else reaches a key.
func validTokenID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !strings.ContainsRune("0123456789abcdef", rune(id[i])) {
			return false
		}
	}
	return true
}

// runVisitors runs op for visitors in one script call.
func (q *Queue) runVisitors(ctx context.Context, rdb redis.Scripter, o visitorOp, abandon int64, limit EntryLimit, lanes, visitors []string, entries []entryArg) *redis.Cmd {
	return o.script().Run(ctx, rdb, q.keysFor(o, lanes, entries), q.argsFor(o, abandon, limit, lanes, visitors, entries)...)
}

// validClient: a client name is an address prefix, as the proxy writes it, and nothing else reaches a key.
func validClient(c string) bool {
	if c == "" || len(c) > 64 {
		return false
	}
	for i := 0; i < len(c); i++ {
		if !strings.ContainsRune("0123456789abcdefABCDEF.:/", rune(c[i])) {
			return false
		}
	}
	return true
}

// visitorCall runs op for one visitor, through the store's round trips when there is a store.
func (q *Queue) visitorCall(ctx context.Context, o visitorOp, visitor string, abandonAfter time.Duration, limit EntryLimit) (Position, error) {
	if err := ValidateVisitorID(visitor); err != nil {
		return Position{}, err
	}
	if !limit.active() {
		limit = EntryLimit{SingleUse: limit.SingleUse, HeldPlace: limit.HeldPlace, OnlyHeldPlace: limit.OnlyHeldPlace, HeldLane: limit.HeldLane, Lane: limit.Lane, Shadow: limit.Shadow}
	}
	var reply []int64
	lanes := q.Lanes()
	if q.store != nil {
		r, l, err := q.store.run(ctx, q, o, abandonAfter.Milliseconds(), limit, visitor)
		if err != nil {
			return Position{}, err
		}
		reply, lanes = r, l
	} else {
		v, err := q.runVisitors(ctx, q.rdb, o, abandonAfter.Milliseconds(), limit, lanes, []string{visitor}, []entryArg{entryArgOf(limit)}).Result()
		if err != nil {
			return Position{}, err
		}
		if o == opEnter {
			q.replicate(ctx)
		}
		replies, err := decodeReplies(v, 1)
		if err != nil {
			return Position{}, err
		}
		reply = replies[0]
	}
	p, err := decodePosition(reply, lanes)
	q.noteFailover()
	if err == nil && p.Seq > 0 {
		q.sawSeq(p.Seq)
	}
	return p, err
}

// noteFailover keeps, at the first answer after a failover, the highest arrival sequence the old
// primary named: the new one may have given some of those numbers again before it learnt of them,
// and enter widens the lost range up to it (enter.lua). An answer of the new primary comes after its
// connection told the watch of the failover, so the sequence kept is the old primary's.
func (q *Queue) noteFailover() {
	w := q.Failovers()
	if w == nil {
		return
	}
	epoch, seen := w.Epoch(), q.failoverEpoch.Load()
	if epoch != seen && q.failoverEpoch.CompareAndSwap(seen, epoch) {
		q.beforeFailover.Store(q.highestSeq.Load())
		q.failoverNoticed.Store(time.Now().UnixMilli())
	}
}

// oldPrimarysSeq is noteFailover's sequence while a place of the old primary may come back: for
// abandon-after (ms) since the failover; 0 otherwise.
func (q *Queue) oldPrimarysSeq(abandon int64) int64 {
	if time.Now().UnixMilli()-q.failoverNoticed.Load() > abandon {
		return 0
	}
	return q.beforeFailover.Load()
}

// sawSeq keeps the highest arrival sequence this queue has been told of. Enter sends it along, so
// that a primary a failover set back never gives those numbers again (enter.lua).
func (q *Queue) sawSeq(seq int64) {
	for {
		cur := q.highestSeq.Load()
		if seq <= cur || q.highestSeq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// decodePosition reads one visitor's reply of a script called with lanes.
func decodePosition(res []int64, lanes []string) (Position, error) {
	bad := func() (Position, error) { return Position{}, fmt.Errorf("unexpected script reply %v", res) }
	if len(res) < 2 {
		return bad()
	}
	previous := func(i int) time.Time {
		if len(res) > i && res[i] > 0 {
			return time.UnixMilli(res[i])
		}
		return time.Time{}
	}
	if res[0] == restoredCode {
		if len(res) != 5 && len(res) != 6 {
			return bad()
		}
		p := Position{State: Waiting, Position: res[1], Depth: res[2], Now: time.UnixMilli(res[3]), Seq: res[4], Restored: true}
		if len(res) == 6 {
			p.Lane = laneName(lanes, res[5])
		}
		return p, nil
	}
	switch State(res[0]) {
	case NotQueued:
		p := Position{State: NotQueued, Now: time.UnixMilli(res[1]), Phase: phase.Open}
		if len(res) > 2 {
			p.Phase = phaseOfCode(res[2])
		}
		return p, nil
	case Admitted:
		if len(res) != 4 {
			return bad()
		}
		return Position{State: Admitted, Pass: Pass{time.UnixMilli(res[1]), time.UnixMilli(res[2])}, Now: time.UnixMilli(res[3])}, nil
	case Waiting:
		if len(res) < 4 {
			return bad()
		}
		p := Position{State: Waiting, Position: res[1], Depth: res[2], Now: time.UnixMilli(res[3]), PreviousPoll: previous(4)}
		if len(res) > 5 {
			p.Seq = res[5]
		}
		if len(res) > 6 {
			p.Lane, p.Shadow = waitingLane(lanes, res[6])
		}
		if len(res) > 7 {
			p.Front = res[7]
		}
		return p, nil
	case TurnedAway:
		if len(res) != 3 {
			return bad()
		}
		return Position{State: TurnedAway, Phase: phaseOfCode(res[1]), Now: time.UnixMilli(res[2])}, nil
	case PreQueued:
		if len(res) < 4 {
			return bad()
		}
		p := Position{State: PreQueued, Phase: phase.PreQueue, Arrival: res[1], Depth: res[2], Now: time.UnixMilli(res[3]), PreviousPoll: previous(4)}
		if len(res) > 5 {
			p.Lane = laneName(lanes, res[5])
		}
		return p, nil
	case Drawing:
		return Position{State: Drawing, Phase: phase.Opening, Now: time.UnixMilli(res[1]), PreviousPoll: previous(2)}, nil
	case RateLimited:
		if len(res) != 3 {
			return bad()
		}
		return Position{State: RateLimited, RetryAfter: time.Duration(res[1]) * time.Millisecond, Now: time.UnixMilli(res[2])}, nil
	case TokenSpent:
		if len(res) != 3 || res[1] < 1 {
			return bad()
		}
		return Position{State: TokenSpent, Token: int(res[1] - 1), Now: time.UnixMilli(res[2])}, nil
	}
	return bad()
}

// Stats are a queue's counters.
type Stats struct {
	// Depth is the number of visitors waiting.
	Depth int64
	// Active is the number of passes that have not expired.
	Active int64
	// AdmittedTotal and AbandonedTotal count since the queue was created; InstantAdmittedTotal is
	// the part of AdmittedTotal that Enter admitted at once; ReleasedTotal the passes released.
	AdmittedTotal, AbandonedTotal, InstantAdmittedTotal, ReleasedTotal int64
	// PreQueued is the number of pre-queue places not drawn yet.
	PreQueued int64
	// Shadowed is the number of shadow places (spec.entry.shadowQueue), which Depth leaves out;
	// ShadowedChallengeFailed and ShadowedOverLimit how many were given since the room began, to
	// entries whose challenge failed and to clients far over their limit.
	Shadowed, ShadowedChallengeFailed, ShadowedOverLimit int64
	// Now is Redis' clock.
	Now time.Time
	// Lanes are, for a room with lanes, the main queue (named MainLane) then each lane: its depth
	// and the visitors ticks admitted from it since the room began.
	Lanes []LaneStats
}

// LaneStats are a lane's counters.
type LaneStats struct {
	Name                 string
	Depth, AdmittedTotal int64
}

// Stats reads the counters in one round trip.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	lanes := q.Lanes()
	res, err := statsScript.Run(ctx, q.rdb, q.statsKeys(lanes), statsArgs(lanes)...).Int64Slice()
	if err != nil {
		return Stats{}, fmt.Errorf("reading stats of queue %s: %w", q.prefix, err)
	}
	return parseStats(res, lanes)
}

func (q *Queue) statsKeys(lanes []string) []string {
	return append([]string{q.keys.wait, q.keys.active, q.keys.totals, q.keys.pre, q.keys.shadow}, q.laneKeys(lanes)...)
}

func statsArgs(lanes []string) []any {
	args := make([]any, len(lanes))
	for i, l := range lanes {
		args[i] = l
	}
	return args
}

func parseStats(res []int64, lanes []string) (Stats, error) {
	const base = 11
	want := base
	if len(lanes) > 0 {
		want += 1 + 2*len(lanes)
	}
	if len(res) != want {
		return Stats{}, fmt.Errorf("unexpected stats reply %v", res)
	}
	s := Stats{Depth: res[0], Active: res[1], AdmittedTotal: res[2], AbandonedTotal: res[3], Now: time.UnixMilli(res[4]),
		InstantAdmittedTotal: res[5], ReleasedTotal: res[6], PreQueued: res[7],
		Shadowed: res[8], ShadowedChallengeFailed: res[9], ShadowedOverLimit: res[10]}
	if len(lanes) > 0 {
		s.Lanes = append(s.Lanes, LaneStats{Name: MainLane, Depth: res[0], AdmittedTotal: res[base]})
		for i, l := range lanes {
			s.Lanes = append(s.Lanes, LaneStats{Name: l, Depth: res[base+1+2*i], AdmittedTotal: res[base+2+2*i]})
		}
	}
	return s, nil
}

// Delete removes every key of the queue, on whichever node holds its slot.
func (q *Queue) Delete(ctx context.Context) error {
	node := q.rdb
	if cc, ok := q.rdb.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, q.keys.wait)
		if err != nil {
			return fmt.Errorf("finding the node of queue %s: %w", q.prefix, err)
		}
		node = master
	}
	// The prefix holds no glob characters (New refuses them), so it matches literally.
	iter := node.Scan(ctx, 0, q.prefix+":*", 1000).Iterator()
	batch := make([]string, 0, 256)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		// UNLINK frees large sets in the background instead of blocking Redis.
		if err := node.Unlink(ctx, batch...).Err(); err != nil {
			return fmt.Errorf("deleting keys of queue %s: %w", q.prefix, err)
		}
		batch = batch[:0]
		return nil
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("listing keys of queue %s: %w", q.prefix, err)
	}
	return flush()
}
