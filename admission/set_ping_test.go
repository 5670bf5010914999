package admission_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestTheRoomsOfASetShareTheirRedisChecks: the rooms of a shared proxy set on one Redis check it at
// the same moments with one PING between them, not one each; each room still sees Redis go and come
// back at the next check.
func TestTheRoomsOfASetShareTheirRedisChecks(t *testing.T) {
	const rooms, interval = 40, 100 * time.Millisecond
	redis := testenv.StartRedis(t)
	rdb, err := queue.NewClient(redis.URL(), queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store := queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	set := admission.NewSet(logr.Discard())
	proxies := make([]*admission.Room, rooms)
	for i := range proxies {
		name := fmt.Sprintf("room-%02d", i)
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		wq := builder.Queue("shop", name).UID(types.UID("uid-"+name)).Shared("pool", name+".shop.example").Obj()
		proxies[i] = addRoom(t, set, store, wq, key, time.Now().Add(time.Duration(i)*time.Second))
	}
	pings := func() int64 {
		t.Helper()
		stats, err := testenv.CommandStats(context.Background(), rdb)
		if err != nil {
			t.Fatal(err)
		}
		return stats["ping"].Calls
	}

	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { set.Run(ctx, interval) })
	t.Cleanup(func() {
		cancel()
		running.Wait()
	})
	// Each room pings once as it starts; the checks after that fall on the interval's multiples.
	time.Sleep(interval)
	sentBefore, pingsBefore, start := store.PingsSent(), pings(), time.Now()
	time.Sleep(10 * interval)
	sent, seen, moments := store.PingsSent()-sentBefore, pings()-pingsBefore, int64(time.Since(start)/interval)
	t.Logf("%d rooms over %d checks: %d shared PINGs sent, Redis served %d", rooms, moments, sent, seen)
	if sent < moments/2 || sent > 2*(moments+1) {
		t.Errorf("the rooms sent %d shared PINGs over %d checks, want about one a check", sent, moments)
	}
	// Redis' own count, read a moment apart from the store's at each end of the window: within one.
	if seen > sent+1 {
		t.Errorf("Redis served %d PINGs over %d checks of %d rooms, of which %d shared: want no other", seen, moments, rooms, sent)
	}

	roomsSee := func(down bool) {
		t.Helper()
		deadline := time.Now().Add(20 * interval)
		for {
			n := 0
			for _, p := range proxies {
				if p.RedisDown() == down {
					n++
				}
			}
			if n == rooms {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d rooms see Redis down=%v", n, rooms, down)
			}
			time.Sleep(interval / 10)
		}
	}
	roomsSee(false)
	redis.Stop()
	roomsSee(true)
	if err := redis.Restart(); err != nil {
		t.Fatal(err)
	}
	roomsSee(false)
}
