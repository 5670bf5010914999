package queue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herdgate/herdgate/test/testenv"
)

func TestStoreBatchesConcurrentPolls(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartRedis(t)
	rdb, err := NewClient(srv.URL(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	store := NewStore(rdb, StoreOptions{Pipelines: 2, MaxBatch: 64})
	defer store.Close()
	q, err := store.Queue("test", "batched")
	if err != nil {
		t.Fatal(err)
	}
	ids := visitorIDs("b", 500)
	enterAll(t, q, ids...)

	pipelinesBefore, callsBefore := store.PipelineStats()
	// The script cache is gone: the first pipelines meet NOSCRIPT and must recover on their own.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			p, err := q.Status(ctx, id, time.Hour)
			if err == nil && (p.State != Waiting || p.Position != int64(i+1)) {
				err = errors.New("wrong position")
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// 500 concurrent polls on two pipelines must have shared round trips.
	pipelines, calls := store.PipelineStats()
	pipelines, calls = pipelines-pipelinesBefore, calls-callsBefore
	if calls != int64(len(ids)) {
		t.Fatalf("the store sent %d calls for %d polls", calls, len(ids))
	}
	if pipelines*2 > calls {
		t.Fatalf("%d polls took %d round trips: the store did not batch", calls, pipelines)
	}
	t.Logf("%d concurrent polls in %d round trips", calls, pipelines)
}

func TestStoreCallerContextAndClose(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb, err := NewClient(srv.URL(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	store := NewStore(rdb, StoreOptions{})
	q, err := store.Queue("test", "closing")
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Enter(cancelled, "v", time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := q.Enter(context.Background(), "v", time.Hour); err != nil {
		t.Fatal(err)
	}
	store.Close()
	store.Close() // twice is fine
	if _, err := q.Status(context.Background(), "v", time.Hour); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("Status after Close: %v, want ErrStoreClosed", err)
	}
	// Admit never goes through the pipelines: it still works on the client.
	if res, err := q.Admit(context.Background(), AdmitRequest{TickID: 1, Limit: 1, PassTTL: time.Minute, AbandonAfter: time.Hour}); err != nil || len(res.Admitted) != 1 {
		t.Fatalf("Admit after Close = %+v, %v", res, err)
	}
}

// A Redis that accepts connections and never answers (a host gone without a reset, a partition)
// must not hold visitors for the client's own timeouts and dial retries: the store gives up on the
// round trip and every caller hears an error it can turn into a 503.
func TestStoreGivesUpOnARedisThatDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	// The client's own read timeout is far beyond the store's, so only the store can end the wait.
	rdb, err := NewClient("redis://"+ln.Addr().String()+"?read_timeout=1h&write_timeout=1h&dial_timeout=1h", ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	store := NewStore(rdb, StoreOptions{RoundTripTimeout: 100 * time.Millisecond})
	defer store.Close()
	q, err := store.Queue("test", "silent")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, err := q.Enter(context.Background(), fmt.Sprintf("v%d", i), time.Hour)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil {
			t.Fatal("Enter against a Redis that never answers succeeded")
		}
	}
}

func TestDecodeReplies(t *testing.T) {
	got, err := decodeReplies("2 0 1700000000000 5 2 3 10 1700000000000 0", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int64{{0, 1700000000000}, {2, 3, 10, 1700000000000, 0}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("decodeReplies = %v, want %v", got, want)
	}
	for _, bad := range []any{"", "2 0", "1 0 1 2", "x", "-1", "1 0.5", int64(3), []any{int64(1)}} {
		if got, err := decodeReplies(bad, 1); err == nil {
			t.Errorf("decodeReplies(%#v, 1) = %v, want an error", bad, got)
		}
	}
}
