package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/internal/settings"
)

// DrawSeed is where a draw's seed came from, as the first scheduler to settle it kept it in Redis
// with the draw (queue.SettleDrawSeed): the room's committed secret alone, or with a beacon's round.
type DrawSeed struct {
	Source herdgatev1alpha1.DrawSeedSource `json:"source"`
	// Chain is the beacon's chain, when it was read; Round the round the draw committed to (0 when
	// the chain was never read).
	Chain *beacon.Chain `json:"chain,omitempty"`
	Round uint64        `json:"round,omitempty"`
	// Randomness, Signature and PreviousSignature are the verified round, with Source Beacon.
	Randomness        []byte `json:"randomness,omitempty"`
	Signature         []byte `json:"signature,omitempty"`
	PreviousSignature []byte `json:"previousSignature,omitempty"`
	// FallbackReason says why a draw meant to take a beacon's round did not.
	FallbackReason string `json:"fallbackReason,omitempty"`
}

// seed is the draw's seed: the committed secret, or HMAC-SHA256 of it over the round (beacon.Seed).
func (d DrawSeed) seed(secret []byte) ([]byte, error) {
	if d.Source != herdgatev1alpha1.DrawSeedBeacon {
		return secret, nil
	}
	if d.Chain == nil {
		return nil, fmt.Errorf("a beacon seed without its chain")
	}
	return beacon.Seed(secret, d.Chain.Hash, d.Round, d.Randomness)
}

const (
	// beaconRetry is how often a draw waiting for its round asks the beacon again.
	beaconRetry = 500 * time.Millisecond
	// beaconCallTimeout bounds one call to the beacon.
	beaconCallTimeout = 5 * time.Second
)

// beaconWait is a draw waiting for its beacon's round. The calls run beside the ticks, which go on
// on time meanwhile; each tick takes in what the last call found.
type beaconWait struct {
	opensAt  time.Time
	chain    *beacon.Chain
	lastErr  string
	nextTry  time.Time
	inFlight bool
	results  chan beaconResult
}

type beaconResult struct {
	chain *beacon.Chain
	round *beacon.Round
	err   error
}

// drawSeedOf settles the seed of the opening's draw, once it has begun: the one another scheduler
// settled, or the committed secret for a room without a beacon, or the beacon's round once it came
// and verified, or the committed secret once maxWait passed without it. ready is false while the
// draw waits for the beacon.
func (r *runner) drawSeedOf(ctx context.Context, st *tickState, cfg *Room, opensAt time.Time) (seed []byte, ready bool, err error) {
	b := cfg.Schedule.Beacon
	if b == nil {
		r.noteDrawSeed(opensAt, DrawSeed{Source: herdgatev1alpha1.DrawSeedCommitReveal})
		return cfg.DrawSeed, true, nil
	}
	kept, err := st.q.SettleDrawSeed(ctx, opensAt, "")
	if err != nil {
		return nil, false, err
	}
	if kept == "" {
		found, ok := r.waitForBeacon(ctx, st, b, opensAt)
		if !ok {
			return nil, false, nil
		}
		raw, err := json.Marshal(found)
		if err != nil {
			return nil, false, err
		}
		if kept, err = st.q.SettleDrawSeed(ctx, opensAt, string(raw)); err != nil {
			return nil, false, err
		}
	}
	var d DrawSeed
	if err := json.Unmarshal([]byte(kept), &d); err != nil {
		return nil, false, fmt.Errorf("the draw's seed record in Redis: %w", err)
	}
	if seed, err = d.seed(cfg.DrawSeed); err != nil {
		return nil, false, err
	}
	r.noteDrawSeed(opensAt, d)
	log := ctrl.LoggerFrom(ctx)
	if d.Source == herdgatev1alpha1.DrawSeedBeacon {
		log.Info("Drawing with the beacon's round", "waitingqueue", r.key.String(), "round", d.Round)
	} else {
		log.Info("Drawing with the committed seed alone: the beacon failed", "waitingqueue", r.key.String(), "reason", d.FallbackReason)
	}
	return seed, true, nil
}

// noteDrawSeed records the draw's seed source in the snapshot.
func (r *runner) noteDrawSeed(opensAt time.Time, d DrawSeed) {
	r.update(func(s *Snapshot) {
		if s.Draw == nil || !s.Draw.OpensAt.Equal(opensAt) {
			s.Draw = &DrawProgress{OpensAt: opensAt}
		}
		s.Draw.Seed = &d
	})
}

// waitForBeacon asks the beacon for the round after the opening, at most every beaconRetry, and
// returns the seed's record once the round came and verified, or once maxWait passed after the
// round's time (or after the opening, when the chain could not be read): then the draw falls back.
func (r *runner) waitForBeacon(ctx context.Context, st *tickState, b *settings.Beacon, opensAt time.Time) (DrawSeed, bool) {
	w := st.beacon
	if w == nil || !w.opensAt.Equal(opensAt) {
		w = &beaconWait{opensAt: opensAt, results: make(chan beaconResult, 1)}
		st.beacon = w
	}
	select {
	case res := <-w.results:
		w.inFlight = false
		if res.chain != nil {
			w.chain = res.chain
		}
		if res.err != nil {
			w.lastErr = res.err.Error()
			r.update(func(s *Snapshot) {
				if s.Draw != nil {
					s.Draw.BeaconError = w.lastErr
				}
			})
		}
		if res.round != nil {
			return DrawSeed{Source: herdgatev1alpha1.DrawSeedBeacon, Chain: w.chain, Round: res.round.Number,
				Randomness: res.round.Randomness, Signature: res.round.Signature, PreviousSignature: res.round.PreviousSignature}, true
		}
	default:
	}
	now := r.s.clock.Now()
	deadline, round := opensAt.Add(b.MaxWait), uint64(0)
	if w.chain != nil {
		round = w.chain.RoundAfter(opensAt)
		deadline = w.chain.TimeOf(round).Add(b.MaxWait)
	}
	if !now.Before(deadline) {
		reason := fmt.Sprintf("the beacon's chain could not be read within %s of the opening: %s", b.MaxWait, w.lastErr)
		if w.chain != nil {
			reason = fmt.Sprintf("round %d did not come and verify within %s of its time", round, b.MaxWait)
			if w.lastErr != "" {
				reason += ": " + w.lastErr
			}
		}
		return DrawSeed{Source: herdgatev1alpha1.DrawSeedCommitReveal, Chain: w.chain, Round: round, FallbackReason: reason}, true
	}
	if w.inFlight || now.Before(w.nextTry) || (w.chain != nil && now.Before(w.chain.TimeOf(round))) {
		return DrawSeed{}, false
	}
	w.inFlight, w.nextTry = true, now.Add(beaconRetry)
	cl := beacon.Client{URL: b.URL, HTTP: r.s.beaconHTTP}
	chain, results := w.chain, w.results
	go func() {
		callCtx, cancel := context.WithTimeout(ctx, beaconCallTimeout)
		defer cancel()
		results <- askBeacon(callCtx, cl, b.ChainHash, chain, opensAt, now)
	}()
	return DrawSeed{}, false
}

// askBeacon reads the chain when it is not known yet, then the round after the opening, and
// verifies it; a round that does not verify is refused, and the draw goes on waiting for one that
// does.
func askBeacon(ctx context.Context, cl beacon.Client, hash string, chain *beacon.Chain, opensAt, now time.Time) beaconResult {
	if chain == nil {
		c, err := cl.FetchChain(ctx, hash)
		if err != nil {
			return beaconResult{err: err}
		}
		chain = &c
		if now.Before(c.TimeOf(c.RoundAfter(opensAt))) {
			// Known now; the round is asked for once its time has come.
			return beaconResult{chain: chain}
		}
	}
	round, err := cl.FetchRound(ctx, *chain, chain.RoundAfter(opensAt))
	if err != nil {
		return beaconResult{chain: chain, err: err}
	}
	if err := chain.Verify(round); err != nil {
		return beaconResult{chain: chain, err: fmt.Errorf("refused: %w", err)}
	}
	return beaconResult{chain: chain, round: &round}
}

// defaultBeaconHTTP calls beacons for the draws.
var defaultBeaconHTTP = &http.Client{Timeout: beaconCallTimeout}
