package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestAReplicatedQueueAnswersOnceAReplicaHasTheWrite: with the replica a quarter second behind, an
// asynchronous entry is answered before the replica has it, a replicated entry and admission after;
// a Replicated queue without a replica answers after the bounded wait and counts the write as
// unacknowledged, the write standing.
func TestAReplicatedQueueAnswersOnceAReplicaHasTheWrite(t *testing.T) {
	ctx := context.Background()
	g := testenv.StartRedisSentinelGroup(t, 1, 1, 250*time.Millisecond)
	rdb, err := NewClient(g.Servers[0].URL(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	replica := redis.NewClient(&redis.Options{Addr: g.Servers[1].Addr()})
	t.Cleanup(func() { _ = replica.Close() })
	q := newQueue(t, rdb)
	onReplica := func(key, member string) bool {
		if member == "" {
			return replica.Exists(ctx, key).Val() == 1
		}
		if key == q.keys.passes {
			return replica.HExists(ctx, key, member).Val()
		}
		return replica.ZScore(ctx, key, member).Err() == nil
	}

	enterAll(t, q, "async")
	if onReplica(q.keys.wait, "async") {
		t.Fatal("the replica had an asynchronous entry as soon as it was answered: it is not behind")
	}
	q.SetReplicated(2 * time.Second)
	enterAll(t, q, "replicated")
	if !onReplica(q.keys.wait, "replicated") {
		t.Fatal("a replicated entry was answered before the replica had it")
	}
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatalf("admitting: %+v, %v", res, err)
	}
	if !onReplica(q.keys.passes, res.Admitted[0].ID) {
		t.Fatal("a replicated admission was answered before the replica had its pass record")
	}
	if n := q.Unacknowledged(); n != 0 {
		t.Fatalf("%d writes unacknowledged, want 0", n)
	}

	lone := newQueue(t, startClient(t))
	lone.SetReplicated(50 * time.Millisecond)
	enterAll(t, lone, "alone")
	if p, err := lone.Status(ctx, "alone", longAbandon); err != nil || p.State != Waiting || lone.Unacknowledged() != 1 {
		t.Fatalf("a Replicated queue without a replica: %+v, %v, %d unacknowledged; want the visitor waiting and 1", p, err, lone.Unacknowledged())
	}
}

// BenchmarkDurability runs entries through the batching store, and reference ticks, on a primary
// with one replica on loopback, asynchronous and Replicated side by side: what waiting for the
// replica costs in throughput (docs/performance.md).
func BenchmarkDurability(b *testing.B) {
	g := testenv.StartRedisSentinelGroup(b, 1, 1, 0)
	rdb, err := NewClient(g.Servers[0].URL(), ClientOptions{PoolSize: benchConcurrency})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rdb.Close() })
	for _, wait := range []time.Duration{0, DefaultReplicaWait} {
		mode := "async"
		if wait > 0 {
			mode = "replicated"
		}
		b.Run("enter/"+mode, func(b *testing.B) {
			store := NewStore(rdb, StoreOptions{})
			b.Cleanup(store.Close)
			q, err := store.Queue("bench", "durability-enter-"+mode)
			if err != nil {
				b.Fatal(err)
			}
			q.SetReplicated(wait)
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(max(1, benchConcurrency/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Enter(ctx, fmt.Sprintf("v%d", next.Add(1)), time.Hour); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if q.Unacknowledged() != 0 {
				b.Errorf("%d writes unacknowledged", q.Unacknowledged())
			}
		})
		b.Run("admit14/"+mode, func(b *testing.B) {
			q, err := New(rdb, "bench", fmt.Sprintf("durability-admit-%s-%d", mode, b.N))
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			fill(b, q, 14*(b.N+1), func() string { return fmt.Sprintf("w%d", next.Add(1)) })
			q.SetReplicated(wait)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				res, err := q.Admit(ctx, AdmitRequest{TickID: int64(i + 1), Limit: 14, Window: 100 * time.Millisecond, PassTTL: passTTL, AbandonAfter: longAbandon})
				if err != nil || len(res.Admitted) != 14 {
					b.Fatalf("tick %d: %d admitted, %v", i, len(res.Admitted), err)
				}
			}
			b.StopTimer()
		})
	}
}
