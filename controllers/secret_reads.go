package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// secretRead is what a reconcile read of the Secrets (and ConfigMaps) a room refers to: its Redis
// URL, the values its spec refers to, and its own Secret as the reconcile left it. The manager may
// not watch Secrets (docs/guides/operations.md, "Permissions"), so it reads them by name; a room is
// reconciled for every change the scheduler reports, a busy one every 10 s, and reading at each
// would cost the API server a read per busy room every 10 s for values that change only when someone
// edits them. They are read again when the room's generation changes and at its resync (readDue),
// which is how a change by someone else is noticed, as before.
type secretRead struct {
	generation int64
	// at is when they were read; spread is the room's place in the resyncs' spread (resyncAfter).
	at       time.Time
	spread   float64
	redisURL string
	refs     map[string][]byte
	secret   *corev1.Secret
}

// lastRead is what the room's last read found, while it serves: same generation, resync not due.
func (r *WaitingQueueReconciler) lastRead(wq *herdgatev1alpha1.WaitingQueue) (secretRead, bool) {
	v, ok := r.secretReads.Load(wq.UID)
	if !ok {
		return secretRead{}, false
	}
	read := v.(secretRead)
	if read.generation != wq.Generation || !r.now().Before(r.readDue(read)) {
		return secretRead{}, false
	}
	return read, true
}

// readDue is when the room's resync reads its Secrets again: a resync after the read, as long as a
// resync is for the rooms there are now, so that rooms read while their number grew do not all read
// again at the shorter resync of a smaller number.
func (r *WaitingQueueReconciler) readDue(read secretRead) time.Time {
	return read.at.Add(r.resyncAfter(read.spread))
}

// rememberRead keeps what a reconcile read, and the room's Secret as it left it, until it is due.
func (r *WaitingQueueReconciler) rememberRead(wq *herdgatev1alpha1.WaitingQueue, read secretRead) {
	read.generation, read.secret = wq.Generation, read.secret.DeepCopy()
	r.secretReads.Store(wq.UID, read)
}

// lastRedisURL is the Redis URL the room's last read found, whatever its generation or age; "" when
// none is kept.
func (r *WaitingQueueReconciler) lastRedisURL(wq *herdgatev1alpha1.WaitingQueue) string {
	if v, ok := r.secretReads.Load(wq.UID); ok {
		return v.(secretRead).redisURL
	}
	return ""
}
