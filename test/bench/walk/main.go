// Command walk records where in herdgate's code one status poll goes, from the fast front to its
// answer: a visitor enters a room on a real Redis behind forty others, waits as told, and polls once.
// Built with coverage and run with $GOCOVERDIR, it writes the counters of that poll alone there: the
// files with a counted block are the files the poll's walk crosses. Run under a debugger's trace of
// herdgate's functions, the calls between pollBegins and pollEnds are the walk in order, which
// `walk stays <binary> <trace>` sums up (docs/performance.md, "A status poll's walk").
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"runtime/coverage"
	"strconv"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "stays" {
		if err := stays(os.Args[2], os.Args[3], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "walk:", err)
			os.Exit(1)
		}
		return
	}
	if err := walk(os.Getenv("GOCOVERDIR")); err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
}

// walk runs the poll; built with coverage, its counters alone go to dir.
func walk(dir string) error {
	counted := dir != ""
	tmp, err := os.MkdirTemp("", "herdgate-walk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	redis, err := testenv.NewRedis(tmp)
	if err != nil {
		return err
	}
	defer redis.Stop()
	rdb, err := queue.NewClient(redis.URL(), queue.ClientOptions{})
	if err != nil {
		return err
	}
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer func() { store.Close(); _ = rdb.Close() }()
	ctx := context.Background()
	q, err := store.Queue("shop", "orders")
	if err != nil {
		return err
	}
	quota, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		return err
	}
	if err := q.PublishPlan(ctx, queue.PublishedPlan{Quota: quota, PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: time.Minute}); err != nil {
		return err
	}
	// Forty wait ahead, so that the poll is answered with a position near the front, by Redis.
	for i := range 40 {
		if _, err := q.Enter(ctx, "ahead-"+strconv.Itoa(i), time.Hour); err != nil {
			return err
		}
	}
	cfg, err := admission.NewConfig(builder.Queue("shop", "orders").Obj(), []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		return err
	}
	room, err := admission.NewRoom(cfg, store, admission.Options{})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f := front.NewFast(room, front.FastOptions{})
	go func() { _ = f.Serve(ln) }()
	defer func() { _ = f.Shutdown(ctx) }()
	base := "http://" + ln.Addr().String()

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	var entered struct {
		Position   int64 `json:"position"`
		NextPollMs int64 `json:"nextPollMs"`
	}
	res, err := client.Post(base+"/.herdgate/enter", "", nil)
	if err != nil {
		return err
	}
	_ = json.NewDecoder(res.Body).Decode(&entered)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || entered.Position == 0 {
		return fmt.Errorf("enter: %s, position %d; want a place behind the forty", res.Status, entered.Position)
	}
	time.Sleep(time.Duration(entered.NextPollMs) * time.Millisecond)

	if counted {
		if err := coverage.ClearCounters(); err != nil {
			return err
		}
	}
	pollBegins()
	res, err = client.Get(base + "/.herdgate/status")
	if err != nil {
		return err
	}
	_ = res.Body.Close()
	pollEnds()
	if counted {
		if err := coverage.WriteCountersDir(dir); err != nil {
			return err
		}
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the poll: %s; want 200 with the visitor's position", res.Status)
	}
	return nil
}

// pollBegins and pollEnds mark the poll for a tracer that follows its calls in order (a debugger's
// trace of herdgate's functions): what it sees between them is the poll's walk.
//
//go:noinline
func pollBegins() {}

//go:noinline
func pollEnds() {}
