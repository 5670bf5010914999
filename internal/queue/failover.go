package queue

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failover is a change of the primary that may have lost writes: a replica promoted in its place
// (Sentinel, a Cluster's failover), or, behind one address or one Sentinel master, a primary with no
// history of the one before (a restart without persistence).
type Failover struct {
	// Epoch counts the failovers the client saw; 0 before the first.
	Epoch int64
	// At is when the client first reached the new primary.
	At time.Time
	// Promoted says a replica took over; false for a primary that started afresh.
	Promoted bool
}

// FailoverWatch learns of failovers from the connections a client opens: a client connects anew
// after its primary went away, and each new connection asks its server for its replication ids
// (INFO replication). A promoted replica names its old primary's id as its second one
// (master_replid2), so a failover is told apart from a client reaching another Cluster master, and
// a primary that started afresh names none the client knew.
type FailoverWatch struct {
	// onePrimary: the client has one primary at a time (one server, or a Sentinel master), so any
	// primary it does not know follows the one before.
	onePrimary bool

	// epoch is last.Epoch, read without the lock by the calls of every visitor (Epoch).
	epoch atomic.Int64

	mu     sync.Mutex
	seen   map[string]bool // replication ids of the primaries reached
	last   Failover
	notify []chan struct{}
}

// NewFailoverWatch is a watch for a client of the URL's kind; ClientOptions.Failovers hands it to
// NewClient.
func NewFailoverWatch() *FailoverWatch { return &FailoverWatch{seen: map[string]bool{}} }

// Last is the latest failover seen; its Epoch is 0 before the first.
func (w *FailoverWatch) Last() Failover {
	if w == nil {
		return Failover{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Epoch is Last().Epoch without taking the watch's lock: cheap enough for every call.
func (w *FailoverWatch) Epoch() int64 {
	if w == nil {
		return 0
	}
	return w.epoch.Load()
}

// Changed returns a channel closed at the next failover; one that never closes for a nil watch.
func (w *FailoverWatch) Changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.notify = append(w.notify, ch)
	return ch
}

// onConnect is the client's OnConnect: it never fails a connection, since a server that does not
// answer INFO (a proxy in front of Redis, a managed service that renames it) is still served.
func (w *FailoverWatch) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "replication").Result()
	if err != nil {
		return nil
	}
	w.saw(parseReplication(info), time.Now())
	return nil
}

// replication is what INFO replication says of a server's history.
type replication struct {
	primary       bool
	replid, prior string // master_replid and master_replid2
}

func parseReplication(info string) replication {
	var r replication
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			r.primary = v == "master"
		case "master_replid":
			r.replid = v
		case "master_replid2":
			if strings.Trim(v, "0") != "" {
				r.prior = v
			}
		}
	}
	return r
}

// saw records a connection to a server with history r.
func (w *FailoverWatch) saw(r replication, now time.Time) {
	if !r.primary || r.replid == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[r.replid] {
		return
	}
	promoted := r.prior != "" && w.seen[r.prior]
	afresh := w.onePrimary && len(w.seen) > 0 && !promoted
	w.seen[r.replid] = true
	if !promoted && !afresh {
		return
	}
	w.last = Failover{Epoch: w.last.Epoch + 1, At: now, Promoted: promoted}
	w.epoch.Store(w.last.Epoch)
	for _, ch := range w.notify {
		close(ch)
	}
	w.notify = nil
}
