package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/queue"
)

// verifyShuffleCmd recomputes every place of a pre-queue draw from its seed and checks the record
// against it, and the seed against the commitment the queue published before its pre-queue opened.
func verifyShuffleCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd verify-shuffle", flag.ContinueOnError)
	seedHex := fs.String("seed", "", "the draw's seed, hex, as status.seed shows it after the opening (required)")
	commitment := fs.String("commitment", "", "status.seedCommitment as published before the pre-queue; checked when given")
	recordPath := fs.String("record", "", `the draw's record, lines "arrival place" (herd export-draw); "-" reads stdin (required)`)
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if *seedHex == "" || *recordPath == "" {
		fmt.Fprintln(stderr, "herd verify-shuffle: flags --seed and --record are required")
		return 2
	}
	seed, err := draw.ParseSeed(*seedHex)
	if err != nil {
		fmt.Fprintf(stderr, "herd verify-shuffle: flag --seed: %v\n", err)
		return 2
	}
	if c := strings.ToLower(strings.TrimSpace(*commitment)); c != "" && len(c) != 64 {
		fmt.Fprintf(stderr, "herd verify-shuffle: flag --commitment: %d hex digits, not 64\n", len(c))
		return 2
	}
	in := io.Reader(os.Stdin)
	if *recordPath != "-" {
		f, err := os.Open(*recordPath)
		if err != nil {
			fmt.Fprintf(stderr, "herd verify-shuffle: flag --record: %v\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}
	record, err := draw.ParseRecord(in)
	if err != nil {
		fmt.Fprintf(stderr, "herd verify-shuffle: %s: %v\n", *recordPath, err)
		return 2
	}
	if err := draw.Verify(seed, strings.ToLower(strings.TrimSpace(*commitment)), record); err != nil {
		fmt.Fprintf(stdout, "FAILED: %v\n", err)
		return 1
	}
	checked := "the seed was not checked against a commitment"
	if *commitment != "" {
		checked = "the seed hashes to the commitment"
	}
	fmt.Fprintf(stdout, "ok: all %d places recomputed from the seed match the record; %s\n", len(record), checked)
	return 0
}

// exportDrawCmd writes a queue's draw record from Redis, for verify-shuffle or for publication.
func exportDrawCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd export-draw", flag.ContinueOnError)
	redisURL := fs.String("redis", "", "URL of the queue's Redis, redis:// or rediss:// (required)")
	name := fs.String("queue", "", "the WaitingQueue, namespace/name (required)")
	out := fs.String("out", "-", `file to write the record to; "-" writes stdout`)
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	namespace, queueName, ok := strings.Cut(*name, "/")
	if *redisURL == "" || !ok || namespace == "" || queueName == "" {
		fmt.Fprintln(stderr, "herd export-draw: flag --redis is required and flag --queue must be namespace/name")
		return 2
	}
	rdb, err := queue.NewClient(*redisURL, queue.ClientOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "herd export-draw: flag --redis: %v\n", err)
		return 2
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	q, err := store.Queue(namespace, queueName)
	if err != nil {
		fmt.Fprintf(stderr, "herd export-draw: flag --queue: %v\n", err)
		return 2
	}
	st, err := q.ReadDrawState(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "herd export-draw: %v\n", err)
		return 1
	}
	if st.OpensAt.IsZero() {
		fmt.Fprintf(stderr, "herd export-draw: queue %s has drawn no pre-queue\n", *name)
		return 1
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintf(stderr, "herd export-draw: flag --out: %v\n", err)
			return 2
		}
		defer f.Close()
		w = f
	}
	fmt.Fprintf(w, "# draw of %s opening at %s: %d drawn, %d placed, %d dropped as silent, done %v\n",
		*name, st.OpensAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), st.Size, st.Placed, st.Dropped, st.Done)
	n, err := q.WriteDrawRecord(ctx, w)
	if err != nil {
		fmt.Fprintf(stderr, "herd export-draw: %v\n", err)
		return 1
	}
	if !st.Done {
		fmt.Fprintf(stderr, "herd export-draw: the draw is still running; the record has %d of %d places\n", n, st.Size)
	}
	return 0
}
