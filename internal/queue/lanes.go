package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A room's metered lanes (spec.lanes): each waits in a sorted set of its own beside the main queue,
// {hg:ns/name}:q:<lane>, in the same arrival sequence and last-seen hash, and every tick's batch is
// shared between the main queue and the lanes by their percentages (admit.lua). A visitor joins a
// lane when it takes its place (EntryLimit.Lane) and keeps it.

// MainLane names the main queue where lanes are listed.
const MainLane = "main"

// MaxLanes bounds a room's lanes besides the main queue.
const MaxLanes = 8

// LaneShare is a lane and its percentage of every tick's batch; the main queue takes the rest.
type LaneShare struct {
	Name    string
	Percent int
}

// lanes is a queue's lane names, in the order of the spec.
type lanes struct{ names atomic.Pointer[[]string] }

// SetLanes sets the room's lanes, by name in the order of the spec: enter places a visitor that
// joins one in its set, and status, enter and Stats look there too. Names are lower-case letters,
// digits and '-', and never "main".
func (q *Queue) SetLanes(names []string) error {
	if err := validLanes(names); err != nil {
		return fmt.Errorf("queue %s: %w", q.prefix, err)
	}
	cur := q.lanes.names.Load()
	if cur != nil && slices.Equal(*cur, names) {
		return nil
	}
	copied := append([]string(nil), names...)
	q.lanes.names.Store(&copied)
	return nil
}

// Lanes are the room's lanes (SetLanes).
func (q *Queue) Lanes() []string {
	if p := q.lanes.names.Load(); p != nil {
		return *p
	}
	return nil
}

func (q *Queue) laneKey(name string) string { return q.keys.wait + ":" + name }

func (q *Queue) laneKeys(names []string) []string {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = q.laneKey(n)
	}
	return keys
}

// laneIndex is the script's number of lane name among names: 1 for the first, 0 for the main
// queue and for a lane the room does not have.
func laneIndex(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i + 1
		}
	}
	return 0
}

// laneName is the name of the script's lane number i among names: "" for the main queue.
func laneName(names []string, i int64) string {
	if i < 1 || int(i) > len(names) {
		return ""
	}
	return names[i-1]
}

// waitingLane reads the lane number of a waiting reply: the lane (laneName) and false, or for a
// shadow place, -1 - i, the lane it reads as and true.
func waitingLane(names []string, i int64) (string, bool) {
	if i < 0 {
		return laneName(names, -1-i), true
	}
	return laneName(names, i), false
}

// laneArg is the admit script's form of the lanes: "name:percent" separated by spaces.
func laneArg(shares []LaneShare) string {
	var b strings.Builder
	for i, s := range shares {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Name)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(s.Percent))
	}
	return b.String()
}

func validLanes(names []string) error {
	if len(names) > MaxLanes {
		return fmt.Errorf("%d lanes, at most %d", len(names), MaxLanes)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !validLaneName(n) {
			return fmt.Errorf("lane %q is not lower-case letters, digits and '-' (at most 63), or is %q", n, MainLane)
		}
		if seen[n] {
			return fmt.Errorf("lane %q is named twice", n)
		}
		seen[n] = true
	}
	return nil
}

func validLaneName(n string) bool {
	if n == "" || len(n) > 63 || n == MainLane || n[0] == '-' || n[len(n)-1] == '-' {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func validShares(shares []LaneShare) error {
	names := make([]string, len(shares))
	total := 0
	for i, s := range shares {
		names[i] = s.Name
		if s.Percent < 1 || s.Percent > 99 {
			return fmt.Errorf("lane %q takes %d %%, 1 to 99 expected", s.Name, s.Percent)
		}
		total += s.Percent
	}
	if total > 99 {
		return fmt.Errorf("the lanes take %d %% together; the main queue needs at least 1", total)
	}
	return validLanes(names)
}

// lanesField is the totals hash's field that names the lanes the room's Redis holds sets of.
const lanesField = "lanes"

// ReconcileLanes makes names the room's lanes in Redis: the visitors of a lane the room no longer
// has join the main queue at their arrival (a set of its own would strand them), and the lanes are
// recorded for the next change. The scheduler calls it when the spec's lanes change, and once after
// it starts. It returns the lanes it retired.
func (q *Queue) ReconcileLanes(ctx context.Context, names []string) ([]string, error) {
	if err := validLanes(names); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.prefix, err)
	}
	recorded, err := q.rdb.HGet(ctx, q.keys.totals, lanesField).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading the lanes of queue %s: %w", q.prefix, err)
	}
	var retired []string
	for _, old := range strings.Fields(recorded) {
		if !slices.Contains(names, old) && validLaneName(old) {
			retired = append(retired, old)
		}
	}
	if len(retired) == 0 && recorded == strings.Join(names, " ") {
		return nil, nil
	}
	_, err = q.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, l := range retired {
			pipe.ZUnionStore(ctx, q.keys.wait, &redis.ZStore{Keys: []string{q.keys.wait, q.laneKey(l)}})
			pipe.Del(ctx, q.laneKey(l))
			pipe.HDel(ctx, q.keys.totals, "laneCredit:"+l)
		}
		pipe.HSet(ctx, q.keys.totals, lanesField, strings.Join(names, " "))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retiring the lanes %v of queue %s: %w", retired, q.prefix, err)
	}
	return retired, nil
}
