package scheduler

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestSchedulerDrawsWithTheBeaconsRound: a room whose draw takes a beacon's round freezes its
// pre-queue at opening, stays Opening until the round after the freeze is out, checks its BLS
// signature and draws with HMAC-SHA256 of its secret over the round; a beacon that signs with
// another key is refused, and one that is late past maxWait, and the room then draws with its
// committed secret alone and says why.
func TestSchedulerDrawsWithTheBeaconsRound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spoil  func(b *testenv.Beacon, round uint64)
		source herdgatev1alpha1.DrawSeedSource
		reason []string
	}{
		{name: "the round comes and verifies", source: herdgatev1alpha1.DrawSeedBeacon},
		{name: "the beacon signs with another key", spoil: func(b *testenv.Beacon, _ uint64) { b.Forge() },
			source: herdgatev1alpha1.DrawSeedCommitReveal, reason: []string{"did not come and verify within 2s", "refused", "does not verify"}},
		{name: "the round is late", spoil: func(b *testenv.Beacon, round uint64) { b.Withhold(round) },
			source: herdgatev1alpha1.DrawSeedCommitReveal, reason: []string{"did not come and verify within 2s", "not published the round yet"}},
		{name: "the beacon is down", spoil: func(b *testenv.Beacon, _ uint64) { b.Down(true) },
			source: herdgatev1alpha1.DrawSeedCommitReveal, reason: []string{"chain could not be read within 2s", "503"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			b := testenv.StartBeacon(t, testenv.BeaconOptions{Now: h.clock.Now, Genesis: gridStart.Add(-time.Minute)})
			opensAt := gridStart.Add(time.Second)
			chain := beacon.Chain{Period: b.Period, GenesisTime: b.Genesis.Unix()}
			round := chain.RoundAfter(opensAt)
			if tc.spoil != nil {
				tc.spoil(b, round)
			}
			cfg := h.queue("beacon", builder.Queue("", "").Schedule(gridStart.Add(-time.Minute), opensAt, time.Time{}).Beacon(b.URL, b.Hash, 2*time.Second))
			cfg.DrawSeed = []byte("the committed secret of the test")
			h.s.Ensure(cfg)
			q := h.engine("beacon")
			h.mustStep(100 * time.Millisecond)
			if _, err := publishedPlan(q, func(p queue.PublishedPlan) bool { return p.Phase == phase.PreQueue }); err != nil {
				t.Fatal(err)
			}
			const n = 200
			for i := range n {
				if p, err := q.Enter(context.Background(), fmt.Sprintf("v%05d", i), time.Hour); err != nil || p.State != queue.PreQueued {
					t.Fatalf("Enter in the pre-queue = %+v, %v", p, err)
				}
			}
			var opening TickReport
			for i := 0; ; i++ {
				r := h.mustStep(100 * time.Millisecond)
				if r.Phase == phase.Open {
					opening = r
					break
				}
				if r.Scheduled.Before(opensAt) && r.Phase != phase.PreQueue || !r.Scheduled.Before(opensAt) && (r.Phase != phase.Opening || len(r.Result.Admitted) != 0) {
					t.Fatalf("the tick at %s: phase %s, %d admitted; want PreQueue before the opening, then Opening admitting nobody", r.Scheduled, r.Phase, len(r.Result.Admitted))
				}
				if i > 100 {
					t.Fatal("the room never opened")
				}
			}
			// Opening lasts until the round's time at least, and ends by maxWait after it.
			roundAt := chain.TimeOf(round)
			if opening.Scheduled.Before(roundAt) || opening.Scheduled.After(roundAt.Add(2*time.Second+time.Second)) {
				t.Fatalf("the room opened at %s; the round comes at %s and the draw waits 2s for it", opening.Scheduled, roundAt)
			}
			snap, _ := h.s.Snapshot(cfg.UID)
			d := snap.Draw
			if d == nil || d.Seed == nil || d.Seed.Source != tc.source || !d.Done {
				t.Fatalf("the draw's snapshot = %+v; want done with seed source %s", d, tc.source)
			}
			for _, want := range tc.reason {
				if !strings.Contains(d.Seed.FallbackReason, want) {
					t.Fatalf("the fallback reason %q does not say %q", d.Seed.FallbackReason, want)
				}
			}
			seed := cfg.DrawSeed
			if tc.source == herdgatev1alpha1.DrawSeedBeacon {
				sig, _ := b.Sign(round)
				randomness := sha256.Sum256(sig)
				if d.Seed.Round != round || string(d.Seed.Signature) != string(sig) || d.Seed.Chain == nil || d.Seed.Chain.PublicKey != b.PublicKey() {
					t.Fatalf("the seed's record = %+v; want round %d as the chain's key signed it", d.Seed, round)
				}
				var err error
				if seed, err = beacon.Seed(cfg.DrawSeed, b.Hash, round, randomness[:]); err != nil {
					t.Fatal(err)
				}
			}
			order := make([]int64, n)
			for i := range order {
				order[i] = int64(i + 1)
			}
			draw.Order(seed, order)
			for i, a := range opening.Result.Admitted {
				arrival, _ := strconv.ParseInt(strings.TrimPrefix(a.ID, "v"), 10, 64)
				if arrival+1 != order[i] {
					t.Fatalf("admitted %d-th: arrival %d; the %s seed puts arrival %d there", i+1, arrival+1, tc.source, order[i])
				}
			}
			if len(opening.Result.Admitted) == 0 {
				t.Fatal("the opening tick admitted nobody")
			}
		})
	}
}
