package kubectl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// beaconDraw is a room whose draw took round of the beacon b at opensAt, as the manager writes its
// status, with the record of n places drawn by that seed.
func beaconDraw(t *testing.T, b *testenv.Beacon, opensAt time.Time, n int) (*herdgatev1alpha1.WaitingQueue, []byte, []draw.Result) {
	t.Helper()
	secret := bytes.Repeat([]byte{9}, draw.SeedBytes)
	chain, err := beacon.Client{URL: b.URL}.FetchChain(t.Context(), b.Hash)
	if err != nil {
		t.Fatal(err)
	}
	round := chain.RoundAfter(opensAt)
	sig, prev := b.Sign(round)
	randomness := sha256.Sum256(sig)
	wq := builder.Queue("shop", "orders").Schedule(opensAt.Add(-time.Hour), opensAt, time.Time{}).Beacon(b.URL, b.Hash, 0).Obj()
	wq.Status.Seed, wq.Status.SeedCommitment = hex.EncodeToString(secret), draw.Commitment(secret)
	wq.Status.Draw = &herdgatev1alpha1.DrawStatus{OpensAt: &metav1.Time{Time: opensAt}, SeedSource: herdgatev1alpha1.DrawSeedBeacon,
		Beacon: &herdgatev1alpha1.BeaconStatus{ChainHash: chain.Hash, Round: int64(round), PublicKey: chain.PublicKey, Scheme: chain.Scheme,
			PeriodSeconds: int64(chain.Period / time.Second), GenesisTime: chain.GenesisTime, GenesisSeed: chain.GenesisSeed, BeaconID: chain.BeaconID,
			Randomness: hex.EncodeToString(randomness[:]), Signature: hex.EncodeToString(sig), PreviousSignature: hex.EncodeToString(prev)}}
	seed, err := beacon.Seed(secret, chain.Hash, round, randomness[:])
	if err != nil {
		t.Fatal(err)
	}
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(i + 1)
	}
	draw.Order(seed, order)
	record := make([]draw.Result, n)
	for i, a := range order {
		record[i] = draw.Result{Arrival: a, Place: int64(i + 1)}
	}
	return wq, secret, record
}

// TestDrawVerifyChecksTheBeaconOffline: draw verify checks a beacon draw from the room's status
// alone: the chain's hash, the round after the opening, the signature and every place; and finds
// each of a forged signature, another round, another chain, a public key other than the one given,
// a record drawn by the committed seed alone and a seed that is not the committed one. A draw that
// fell back says so and checks its places with the committed seed.
func TestDrawVerifyChecksTheBeaconOffline(t *testing.T) {
	b := testenv.StartBeacon(t, testenv.BeaconOptions{})
	opensAt := time.Now().Add(-20 * time.Second).Truncate(time.Second)
	wq, secret, record := beaconDraw(t, b, opensAt, 40)
	lines, err := verifyDraw(wq, secret, "", record)
	out := strings.Join(lines, "\n")
	if err != nil || !strings.Contains(out, "seed source Beacon") || !strings.Contains(out, "its signature verifies") || !strings.Contains(out, "ok: all 40 places") {
		t.Fatalf("a beacon draw: %v\n%s", err, out)
	}
	if _, err := verifyDraw(wq, secret, b.PublicKey(), record); err != nil {
		t.Fatalf("with the chain's public key given: %v", err)
	}

	other := testenv.StartBeacon(t, testenv.BeaconOptions{})
	otherSig, _ := other.Sign(uint64(wq.Status.Draw.Beacon.Round))
	for _, tc := range []struct {
		name   string
		spoil  func(wq *herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result)
		wanted string
	}{
		{"a signature by another key", func(wq *herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			sum := sha256.Sum256(otherSig)
			wq.Status.Draw.Beacon.Signature, wq.Status.Draw.Beacon.Randomness = hex.EncodeToString(otherSig), hex.EncodeToString(sum[:])
			return secret, "", record
		}, "does not verify"},
		{"a randomness that is not the signature's", func(wq *herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			wq.Status.Draw.Beacon.Randomness = strings.Repeat("00", 32)
			return secret, "", record
		}, "not the SHA-256"},
		{"a round other than the first after the opening", func(wq *herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			wq.Status.Draw.Beacon.Round++
			return secret, "", record
		}, "the first round after the opening"},
		{"another chain's key in status", func(wq *herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			wq.Status.Draw.Beacon.PublicKey = other.PublicKey()
			return secret, "", record
		}, "not to the chain hash"},
		{"a chain the spec does not name", func(wq *herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			wq.Spec.Draw.Beacon.ChainHash = other.Hash
			return secret, "", record
		}, "the spec the chain"},
		{"a public key other than the one given", func(*herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			return secret, other.PublicKey(), record
		}, "not the one given"},
		{"a record drawn by the committed seed alone", func(*herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			order := make([]int64, len(record))
			for i := range order {
				order[i] = int64(i + 1)
			}
			draw.Order(secret, order)
			alone := make([]draw.Result, len(order))
			for i, a := range order {
				alone[i] = draw.Result{Arrival: a, Place: int64(i + 1)}
			}
			return secret, "", alone
		}, "arrival"},
		{"a seed that is not the committed one", func(*herdgatev1alpha1.WaitingQueue) ([]byte, string, []draw.Result) {
			return bytes.Repeat([]byte{8}, draw.SeedBytes), "", record
		}, "not to the commitment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spoiled := wq.DeepCopy()
			s, key, rec := tc.spoil(spoiled)
			lines, err := verifyDraw(spoiled, s, key, rec)
			if err == nil || !strings.Contains(err.Error(), tc.wanted) {
				t.Fatalf("verify: %v\n%s\nwant a failure naming %q", err, strings.Join(lines, "\n"), tc.wanted)
			}
		})
	}

	t.Run("a draw that fell back", func(t *testing.T) {
		fell := wq.DeepCopy()
		fell.Status.Draw.SeedSource, fell.Status.Draw.FallbackReason = herdgatev1alpha1.DrawSeedCommitReveal, "round 7 did not come and verify within 1m0s of its time"
		fell.Status.Draw.Beacon.Signature, fell.Status.Draw.Beacon.Randomness = "", ""
		order := make([]int64, 10)
		for i := range order {
			order[i] = int64(i + 1)
		}
		draw.Order(secret, order)
		alone := make([]draw.Result, len(order))
		for i, a := range order {
			alone[i] = draw.Result{Arrival: a, Place: int64(i + 1)}
		}
		lines, err := verifyDraw(fell, secret, "", alone)
		out := strings.Join(lines, "\n")
		if err != nil || !strings.Contains(out, "committed seed alone (seed source CommitReveal): round 7 did not come") || !strings.Contains(out, "ok: all 10 places") {
			t.Fatalf("a draw that fell back: %v\n%s", err, out)
		}
	})
}
