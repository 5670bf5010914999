package beacon_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drand/drand/v2/crypto"

	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestARoundOfARealChainVerifies: against a beacon that signs with a real BLS key, on drand's
// unchained G1 scheme and on its chained scheme, the chain read through the API hashes to its chain
// hash, a published round verifies, and a round with a forged signature, another round's signature,
// a wrong randomness or a lie about the chain is refused.
func TestARoundOfARealChainVerifies(t *testing.T) {
	for _, scheme := range []string{crypto.SigsOnG1ID, crypto.DefaultSchemeID, crypto.UnchainedSchemeID} {
		t.Run(scheme, func(t *testing.T) {
			b := testenv.StartBeacon(t, testenv.BeaconOptions{Scheme: scheme})
			ctx := context.Background()
			cl := beacon.Client{URL: b.URL}
			c, err := cl.FetchChain(ctx, b.Hash)
			if err != nil {
				t.Fatal(err)
			}
			if c.PublicKey != b.PublicKey() || c.Period != time.Second || c.GenesisTime != b.Genesis.Unix() || c.Scheme != scheme {
				t.Fatalf("the chain read: %+v; want the beacon's key, a 1s period and its genesis", c)
			}
			n := b.RoundAt(time.Now()) - 2
			r, err := cl.FetchRound(ctx, c, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Verify(r); err != nil {
				t.Fatalf("a round the chain's key signed: %v", err)
			}
			if _, err := cl.FetchRound(ctx, c, b.RoundAt(time.Now())+5); !errors.Is(err, beacon.ErrNotYet) {
				t.Fatalf("a round to come: %v; want ErrNotYet", err)
			}

			other, err := cl.FetchRound(ctx, c, n-1)
			if err != nil {
				t.Fatal(err)
			}
			swapped := r
			swapped.Signature, swapped.Randomness = other.Signature, other.Randomness
			if err := c.Verify(swapped); err == nil || !strings.Contains(err.Error(), "does not verify") {
				t.Fatalf("round %d with round %d's signature: %v; want refused", n, n-1, err)
			}
			wrong := r
			wrong.Randomness = bytes.Repeat([]byte{7}, 32)
			if err := c.Verify(wrong); err == nil || !strings.Contains(err.Error(), "not the SHA-256") {
				t.Fatalf("a round with another randomness: %v; want refused", err)
			}
			b.Forge()
			forged, err := cl.FetchRound(ctx, c, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Verify(forged); err == nil || !strings.Contains(err.Error(), "does not verify") {
				t.Fatalf("a round signed with another key: %v; want refused", err)
			}
			lie := c
			lie.PublicKey = strings.Repeat("ab", len(c.PublicKey)/2)
			if err := lie.CheckHash(); err == nil {
				t.Fatal("a chain with another public key hashed to the chain hash")
			}
			if _, err := cl.FetchChain(ctx, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "serves no chain") {
				t.Fatalf("a chain the beacon does not serve: %v", err)
			}
		})
	}
}

// TestTheRoundAfterAFreezeIsUnknownAtIt: the round a draw commits to is the first published
// strictly after the freeze, whether the freeze falls on a round's second or between two.
func TestTheRoundAfterAFreezeIsUnknownAtIt(t *testing.T) {
	genesis := time.Unix(1_800_000_000, 0)
	c := beacon.Chain{Period: 3 * time.Second, GenesisTime: genesis.Unix()}
	for _, tc := range []struct {
		at   time.Time
		want uint64
	}{
		{genesis.Add(-time.Hour), 1},
		{genesis.Add(-time.Millisecond), 1},
		{genesis, 2},
		{genesis.Add(500 * time.Millisecond), 2},
		{genesis.Add(2999 * time.Millisecond), 2},
		{genesis.Add(3 * time.Second), 3},
		{genesis.Add(time.Hour + 1500*time.Millisecond), 1202},
	} {
		got := c.RoundAfter(tc.at)
		if got != tc.want || !c.TimeOf(got).After(tc.at) || (got > 1 && c.TimeOf(got-1).After(tc.at)) {
			t.Errorf("the round after %s: %d (at %s); want %d, the first after it", tc.at.Sub(genesis), got, c.TimeOf(got).Sub(genesis), tc.want)
		}
	}
}

// TestTheSeedNeedsBothHalves: the draw's seed changes with the secret, the round and the
// randomness, and refuses a chain hash that is not one.
func TestTheSeedNeedsBothHalves(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	secret, randomness := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	base, err := beacon.Seed(secret, hash, 7, randomness)
	if err != nil || len(base) != 32 {
		t.Fatalf("seed %x, %v", base, err)
	}
	for name, other := range map[string]func() ([]byte, error){
		"another secret":     func() ([]byte, error) { return beacon.Seed(bytes.Repeat([]byte{3}, 32), hash, 7, randomness) },
		"another round":      func() ([]byte, error) { return beacon.Seed(secret, hash, 8, randomness) },
		"another randomness": func() ([]byte, error) { return beacon.Seed(secret, hash, 7, bytes.Repeat([]byte{4}, 32)) },
		"another chain":      func() ([]byte, error) { return beacon.Seed(secret, strings.Repeat("cd", 32), 7, randomness) },
	} {
		if s, err := other(); err != nil || bytes.Equal(s, base) {
			t.Errorf("%s gave the same seed (%v)", name, err)
		}
	}
	if _, err := beacon.Seed(secret, "not-hex", 7, randomness); err == nil {
		t.Error("a chain hash that is not hex was taken")
	}
}
