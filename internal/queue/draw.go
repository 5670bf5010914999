package queue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
)

// MaxPlaceChunk is the most pre-queue visitors one PlaceDrawn call moves into the queue. Each costs a
// handful of Redis commands, so a chunk holds Redis for a few milliseconds at most even with a
// million in the pre-queue (docs/performance.md, make bench-queue), and Enter and Status answer
// between chunks.
const MaxPlaceChunk = 32

// DrawPage is how many pre-queue places one DrawArrivals call reads.
const DrawPage = 1024

// DrawState is how far the draw of a pre-queue went. A draw is named by the opening it belongs to.
type DrawState struct {
	// OpensAt names the draw; zero when no draw ever began.
	OpensAt time.Time
	// Base is the arrival sequence when the draw began: the k-th visitor placed gets Base + k. Size
	// is how many pre-queue places it found.
	Base, Size int64
	// Placed and Dropped count the visitors placed in the queue so far and those dropped for
	// silence; Step counts the chunks.
	Placed, Dropped, Step int64
	// Done is true once the pre-queue is empty.
	Done bool
}

// Settled is the last arrival sequence that holds its final place while the draw runs.
func (s DrawState) Settled() int64 { return s.Base + s.Placed }

// ErrDrawMoved means the draw state was not what the call expected: a chunk was applied already (a
// retry after a lost reply, a second scheduler) or another draw is running. The caller reloads.
var ErrDrawMoved = errors.New("the draw moved on")

func (q *Queue) drawKeys() []string {
	keys := []string{q.keys.pre, q.keys.wait, q.keys.seq, q.keys.draw, q.keys.plan, q.keys.drawn, q.keys.totals, q.keys.seen, q.keys.preLanes}
	return append(keys, q.laneKeys(q.Lanes())...)
}

func decodeDrawState(raw []any) (bool, DrawState, error) {
	if len(raw) != 8 {
		return false, DrawState{}, fmt.Errorf("unexpected draw reply %v", raw)
	}
	nums := make([]int64, 8)
	for i, v := range raw {
		switch x := v.(type) {
		case int64:
			nums[i] = x
		case string:
			if x == "" {
				continue
			}
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return false, DrawState{}, fmt.Errorf("unexpected draw reply %v", raw)
			}
			nums[i] = n
		default:
			return false, DrawState{}, fmt.Errorf("unexpected draw reply %v", raw)
		}
	}
	return nums[0] == 1, DrawState{OpensAt: timeOrZero(nums[1]), Base: nums[2], Size: nums[3], Placed: nums[4], Step: nums[5], Done: nums[6] == 1, Dropped: nums[7]}, nil
}

// BeginDraw freezes the pre-queue for the opening at opensAt: from then on Enter queues new visitors
// behind it, and the published phase is Opening until the last chunk is placed; then it becomes
// after (Open, or Closed when the room has closed already). Calling it again for the same opening
// returns the draw's state. While another opening's draw runs, it returns that one's state with
// ErrDrawMoved: that draw is finished first.
func (q *Queue) BeginDraw(ctx context.Context, opensAt time.Time, after phase.Phase) (DrawState, error) {
	code, ok := phaseCodes[after]
	if !ok || (after != phase.Open && after != phase.Closed) {
		return DrawState{}, fmt.Errorf("beginning the draw of queue %s: phase after it is %q, not Open or Closed", q.prefix, after)
	}
	raw, err := drawScript.Run(ctx, q.rdb, q.drawKeys(), "begin", opensAt.UnixMilli(), code).Slice()
	if err != nil {
		return DrawState{}, fmt.Errorf("beginning the draw of queue %s: %w", q.prefix, err)
	}
	moved, st, err := decodeDrawState(raw)
	if err != nil {
		return DrawState{}, err
	}
	if !moved {
		return st, ErrDrawMoved
	}
	return st, nil
}

// SettleDrawSeed keeps record as the seed of the draw of the opening at opensAt, unless one was
// kept already, and returns the one kept: every scheduler that finishes a draw orders it by the
// seed the first one settled (a beacon's round, or the fallback to the committed secret). An empty
// record only reads it ("" when none is kept). The draw must have begun (BeginDraw); ErrDrawMoved
// says another opening's draw is the latest.
func (q *Queue) SettleDrawSeed(ctx context.Context, opensAt time.Time, record string) (string, error) {
	kept, err := drawScript.Run(ctx, q.rdb, q.drawKeys(), "seed", opensAt.UnixMilli(), record).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", ErrDrawMoved
	case err != nil:
		return "", fmt.Errorf("settling the draw seed of queue %s: %w", q.prefix, err)
	}
	return kept, nil
}

// ReadDrawState reads the state of the latest draw; zero when none began.
func (q *Queue) ReadDrawState(ctx context.Context) (DrawState, error) {
	vals, err := q.rdb.HMGet(ctx, q.keys.draw, "opensAt", "base", "size", "placed", "step", "done", "dropped").Result()
	if err != nil {
		return DrawState{}, fmt.Errorf("reading the draw of queue %s: %w", q.prefix, err)
	}
	raw := []any{int64(1)}
	for _, v := range vals {
		if v == nil {
			v = ""
		}
		raw = append(raw, v)
	}
	_, st, err := decodeDrawState(raw)
	return st, err
}

// DrawArrivals reads up to a page of the pre-queue's arrival numbers after the arrival after (0 from
// the start), in ascending order; fewer than a page means the end.
func (q *Queue) DrawArrivals(ctx context.Context, after int64) ([]int64, error) {
	zs, err := q.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: q.keys.pre, ByScore: true, Start: "(" + strconv.FormatInt(after, 10), Stop: "+inf", Count: DrawPage,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the pre-queue of queue %s: %w", q.prefix, err)
	}
	out := make([]int64, len(zs))
	for i, z := range zs {
		out[i] = int64(z.Score)
	}
	return out, nil
}

// PreQueueArrivals reads every arrival number of the pre-queue, page by page.
func (q *Queue) PreQueueArrivals(ctx context.Context) ([]int64, error) {
	var all []int64
	after := int64(0)
	for {
		page, err := q.DrawArrivals(ctx, after)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < DrawPage {
			return all, nil
		}
		after = page[len(page)-1]
	}
}

// PlaceDrawn moves the pre-queue visitors holding arrivals, in drawn order, to the back of the part of
// the queue placed so far (of the lane each joined in the pre-queue, when the room still has it), dropping those silent for longer than abandonAfter, and records "arrival
// place" for each placed one. st is the state the chunk follows; the new state comes back, or
// ErrDrawMoved with the current one. When the pre-queue is empty the draw is done and the phase
// becomes after.
func (q *Queue) PlaceDrawn(ctx context.Context, st DrawState, arrivals []int64, abandonAfter time.Duration, after phase.Phase) (DrawState, error) {
	if len(arrivals) > MaxPlaceChunk {
		return DrawState{}, fmt.Errorf("placing %d drawn visitors in one call; at most %d", len(arrivals), MaxPlaceChunk)
	}
	code, ok := phaseCodes[after]
	if !ok || (after != phase.Open && after != phase.Closed) {
		return DrawState{}, fmt.Errorf("placing drawn visitors of queue %s: phase after the draw is %q, not Open or Closed", q.prefix, after)
	}
	args := make([]any, 0, 6+len(arrivals))
	args = append(args, "place", st.OpensAt.UnixMilli(), st.Step, abandonAfter.Milliseconds(), code)
	for _, a := range arrivals {
		args = append(args, a)
	}
	raw, err := drawScript.Run(ctx, q.rdb, q.drawKeys(), args...).Slice()
	if err != nil {
		return DrawState{}, fmt.Errorf("placing drawn visitors of queue %s: %w", q.prefix, err)
	}
	moved, next, err := decodeDrawState(raw)
	if err != nil {
		return DrawState{}, err
	}
	if !moved {
		return next, ErrDrawMoved
	}
	return next, nil
}

// ReadDrawRecord reads the latest draw's record, for a check with draw.Verify.
func (q *Queue) ReadDrawRecord(ctx context.Context) ([]draw.Result, error) {
	var buf bytes.Buffer
	if _, err := q.WriteDrawRecord(ctx, &buf); err != nil {
		return nil, err
	}
	return draw.ParseRecord(&buf)
}

// WriteDrawRecord writes the latest draw's record, one "arrival place" line per visitor placed, in the
// order they were placed, reading it from Redis page by page.
func (q *Queue) WriteDrawRecord(ctx context.Context, w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	for start := int64(0); ; start += DrawPage {
		lines, err := q.rdb.LRange(ctx, q.keys.drawn, start, start+DrawPage-1).Result()
		if err != nil {
			return n, fmt.Errorf("reading the draw record of queue %s: %w", q.prefix, err)
		}
		for _, l := range lines {
			if _, err := bw.WriteString(l + "\n"); err != nil {
				return n, err
			}
		}
		n += int64(len(lines))
		if len(lines) < DrawPage {
			return n, bw.Flush()
		}
	}
}
