package controllers

import (
	"context"
	"encoding/hex"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
)

// beaconKey names a beacon's chain as served at an address.
type beaconKey struct{ url, hash string }

// beaconReadTimeout bounds the read of a beacon's chain in a reconcile.
const beaconReadTimeout = 3 * time.Second

// drawStatus is status.draw for the opening sc, whose draw takes a beacon's round: the round it
// commits to, known as soon as the chain is, so that it is public before the pre-queue opens; once
// the draw began, the round as the scheduler took it, or why it fell back. Nil for a draw without a
// beacon.
func (r *WaitingQueueReconciler) drawStatus(ctx context.Context, sc *settings.Schedule, snap *scheduler.Snapshot) *herdgatev1alpha1.DrawStatus {
	if sc.Beacon == nil {
		return nil
	}
	out := &herdgatev1alpha1.DrawStatus{OpensAt: &metav1.Time{Time: sc.OpensAt}, SeedSource: herdgatev1alpha1.DrawSeedBeacon}
	var settled *scheduler.DrawSeed
	if snap != nil && snap.Draw != nil && snap.Draw.OpensAt.Equal(sc.OpensAt) {
		settled = snap.Draw.Seed
	}
	var chain *beacon.Chain
	if settled != nil {
		out.SeedSource, out.FallbackReason, chain = settled.Source, settled.FallbackReason, settled.Chain
	}
	if chain == nil {
		chain = r.beaconChain(ctx, *sc.Beacon)
	}
	if chain == nil {
		return out
	}
	round := chain.RoundAfter(sc.OpensAt)
	b := &herdgatev1alpha1.BeaconStatus{ChainHash: chain.Hash, Round: int64(round), RoundAt: &metav1.Time{Time: chain.TimeOf(round)},
		PublicKey: chain.PublicKey, Scheme: chain.Scheme, PeriodSeconds: int64(chain.Period / time.Second), GenesisTime: chain.GenesisTime,
		GenesisSeed: chain.GenesisSeed, BeaconID: chain.BeaconID}
	if settled != nil && settled.Source == herdgatev1alpha1.DrawSeedBeacon {
		b.Randomness, b.Signature = hex.EncodeToString(settled.Randomness), hex.EncodeToString(settled.Signature)
		b.PreviousSignature = hex.EncodeToString(settled.PreviousSignature)
	}
	out.Beacon = b
	return out
}

// beaconChain is the chain of the beacon, read once per address and chain hash; nil while it
// cannot be read (the scheduler reads it again at the opening).
func (r *WaitingQueueReconciler) beaconChain(ctx context.Context, b settings.Beacon) *beacon.Chain {
	key := beaconKey{b.URL, b.ChainHash}
	if c, ok := r.beaconChains.Load(key); ok {
		chain := c.(beacon.Chain)
		return &chain
	}
	hc := r.BeaconHTTP
	if hc == nil {
		hc = &http.Client{Timeout: beaconReadTimeout}
	}
	callCtx, cancel := context.WithTimeout(ctx, beaconReadTimeout)
	defer cancel()
	chain, err := beacon.Client{URL: b.URL, HTTP: hc}.FetchChain(callCtx, b.ChainHash)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Cannot read the draw's beacon yet", "url", b.URL, "error", err.Error())
		return nil
	}
	r.beaconChains.Store(key, chain)
	return &chain
}

// recordDrawSeed records an Event when the draw took its beacon's round, or fell back without it.
func (r *WaitingQueueReconciler) recordDrawSeed(before, wq *herdgatev1alpha1.WaitingQueue) {
	d, was := wq.Status.Draw, before.Status.Draw
	if d == nil {
		return
	}
	switch {
	case d.Beacon != nil && d.Beacon.Signature != "" && (was == nil || was.Beacon == nil || was.Beacon.Signature != d.Beacon.Signature):
		r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "BeaconRoundTaken", "Draw",
			"The draw took round %d of the beacon's chain %s, whose signature verified: randomness %s", d.Beacon.Round, d.Beacon.ChainHash, d.Beacon.Randomness)
	case d.FallbackReason != "" && (was == nil || was.FallbackReason != d.FallbackReason):
		r.Recorder.Eventf(wq, nil, corev1.EventTypeWarning, "BeaconFallback", "Draw",
			"The draw used the committed seed alone: %s", d.FallbackReason)
	}
}
