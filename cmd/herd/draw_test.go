package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

// drawOn runs a whole draw of n pre-queue visitors on a real Redis, as the scheduler does.
func drawOn(t *testing.T, url string, seed []byte, n int) {
	t.Helper()
	ctx := context.Background()
	rdb, err := queue.NewClient(url, queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store := queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	q, err := store.Queue("shop", "launch")
	if err != nil {
		t.Fatal(err)
	}
	quota, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.PublishPlan(ctx, queue.PublishedPlan{Quota: quota, PollMin: time.Second, PollMax: 5 * time.Second, AbandonAfter: time.Hour, Phase: phase.PreQueue}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if p, err := q.Enter(ctx, fmt.Sprintf("v-%04d", i), time.Hour); err != nil || p.State != queue.PreQueued {
			t.Fatalf("enter: %+v, %v", p, err)
		}
	}
	st, err := q.BeginDraw(ctx, time.UnixMilli(time.Now().UnixMilli()), phase.Open)
	if err != nil {
		t.Fatal(err)
	}
	arrivals, err := q.PreQueueArrivals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	draw.Order(seed, arrivals)
	for from := 0; from < len(arrivals); from += queue.MaxPlaceChunk {
		if st, err = q.PlaceDrawn(ctx, st, arrivals[from:min(from+queue.MaxPlaceChunk, len(arrivals))], time.Hour, phase.Open); err != nil {
			t.Fatal(err)
		}
	}
	if !st.Done {
		t.Fatalf("the draw is not done: %+v", st)
	}
}

func runHerd(args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = run(context.Background(), args, &out, &errs)
	return code, out.String(), errs.String()
}

func TestExportAndVerifyADraw(t *testing.T) {
	redis := testenv.StartRedis(t)
	seed, err := draw.NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	drawOn(t, redis.URL(), seed, 700)
	seedHex, commitment := hex.EncodeToString(seed), draw.Commitment(seed)
	dir := t.TempDir()
	record := filepath.Join(dir, "draw.txt")

	if code, _, stderr := runHerd("export-draw", "--redis", redis.URL(), "--queue", "shop/launch", "--out", record); code != 0 {
		t.Fatalf("export-draw: %d %s", code, stderr)
	}
	code, stdout, stderr := runHerd("verify-shuffle", "--seed", seedHex, "--commitment", commitment, "--record", record)
	if code != 0 || !strings.Contains(stdout, "ok: all 700 places") || !strings.Contains(stdout, "hashes to the commitment") {
		t.Fatalf("verify-shuffle of the true record: %d %q %q", code, stdout, stderr)
	}

	// A record with two places swapped, a seed of another draw, a commitment to another seed: each fails.
	raw, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	a, _, _ := strings.Cut(lines[1], " ")
	b, _, _ := strings.Cut(lines[2], " ")
	_, pa, _ := strings.Cut(lines[1], " ")
	_, pb, _ := strings.Cut(lines[2], " ")
	lines[1], lines[2] = a+" "+pb, b+" "+pa
	tampered := filepath.Join(dir, "tampered.txt")
	if err := os.WriteFile(tampered, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, _ := draw.NewSeed()
	for name, args := range map[string][]string{
		"a tampered record":  {"--seed", seedHex, "--record", tampered},
		"another seed":       {"--seed", hex.EncodeToString(other), "--record", record},
		"another commitment": {"--seed", seedHex, "--commitment", draw.Commitment(other), "--record", record},
	} {
		if code, stdout, _ := runHerd(append([]string{"verify-shuffle"}, args...)...); code != 1 || !strings.HasPrefix(stdout, "FAILED: ") {
			t.Errorf("verify-shuffle with %s: %d %q, want 1 and FAILED", name, code, stdout)
		}
	}

	// Bad input names the flag.
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"verify-shuffle", "--seed", "abc", "--record", record}, "--seed"},
		{[]string{"verify-shuffle", "--seed", seedHex, "--commitment", "12", "--record", record}, "--commitment"},
		{[]string{"verify-shuffle", "--seed", seedHex, "--record", filepath.Join(dir, "missing")}, "--record"},
		{[]string{"verify-shuffle", "--seed", seedHex}, "--record"},
		{[]string{"export-draw", "--redis", redis.URL(), "--queue", "launch"}, "--queue"},
		{[]string{"export-draw", "--redis", "http://127.0.0.1:1", "--queue", "shop/launch"}, "--redis"},
	} {
		if code, _, stderr := runHerd(tc.args...); code != 2 || !strings.Contains(stderr, tc.flag) {
			t.Errorf("herd %v: %d %q, want 2 naming %s", tc.args, code, stderr, tc.flag)
		}
	}
	if code, _, stderr := runHerd("export-draw", "--redis", redis.URL(), "--queue", "shop/none"); code != 1 || !strings.Contains(stderr, "no pre-queue") {
		t.Errorf("export-draw of a queue without a draw: %d %q", code, stderr)
	}
}
