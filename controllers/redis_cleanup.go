package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// A deleted room's Redis keys are deleted beside the reconciles, not inside one. A Redis that stops
// answering holds a cleanup for as long as its bound; a worker held that long is one the rooms created
// meanwhile wait for, and a few deleted rooms would hold every worker
// (docs/architecture.md, "Deleting a room").

const (
	// redisCleanupTimeout bounds one try at a room's cleanup: finding its Redis and deleting its keys.
	redisCleanupTimeout = 10 * time.Second
	// finalizeAttempts bounds how often deletion tries to reach Redis before it lets go.
	finalizeAttempts = 5
)

// redisCleanups runs the deleted rooms' cleanups, one at a time per room, each in a goroutine of its
// own, and keeps how each went until the room's reconcile takes it.
type redisCleanups struct {
	// notify asks for a reconcile of the room whose cleanup has finished. It may drop the request: the
	// reconcile that waits for a cleanup also comes back by itself (cleanupWait).
	notify func(types.NamespacedName)
	// slots, when set, bounds the tries on their way at once: as many as the reconciler has workers,
	// which is how many ran when the tries ran inside the reconciles. The rooms' schedulers draw on the
	// same Redis clients, and a thousand rooms deleted at once must not take their connections.
	slots chan struct{}

	mu     sync.Mutex
	byRoom map[types.UID]*redisCleanup
}

// redisCleanup is one room's cleanup: a try on its way, or the outcome of the last one.
type redisCleanup struct {
	running  bool
	finished bool
	err      error
	// failures counts the tries that failed.
	failures int
}

// cleanupOutcome is what a room's reconcile learns of its cleanup.
type cleanupOutcome struct {
	// pending: a try is on its way, or was just begun.
	pending bool
	// failures counts the failed tries so far, err is the last one's; with pending false and err set,
	// the cleanup failed finalizeAttempts times and gives up.
	failures int
	err      error
	// retry: the last try failed and another is due after retryAfter.
	retry      bool
	retryAfter time.Duration
}

// cleanupWait is when a reconcile that waits for a cleanup comes back by itself, in case its
// notification was dropped.
const cleanupWait = redisCleanupTimeout + 5*time.Second

// cleaner makes a room's try number try at its cleanup, within ctx's bound.
type cleaner func(ctx context.Context, try int) error

// take tells how room's cleanup stands, and begins a try with clean when none is on its way and none
// has finished. A finished cleanup, or one that gave up, is forgotten once told.
func (c *redisCleanups) take(room types.NamespacedName, uid types.UID, clean cleaner) cleanupOutcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byRoom == nil {
		c.byRoom = map[types.UID]*redisCleanup{}
	}
	rc := c.byRoom[uid]
	if rc == nil {
		rc = &redisCleanup{}
		c.byRoom[uid] = rc
	}
	switch {
	case rc.running:
		return cleanupOutcome{pending: true, failures: rc.failures}
	case rc.finished && rc.err == nil:
		delete(c.byRoom, uid)
		return cleanupOutcome{failures: rc.failures}
	case rc.finished:
		rc.failures++
		rc.finished = false
		if rc.failures >= finalizeAttempts {
			delete(c.byRoom, uid)
			return cleanupOutcome{failures: rc.failures, err: rc.err}
		}
		return cleanupOutcome{retry: true, failures: rc.failures, err: rc.err, retryAfter: time.Duration(1<<rc.failures) * time.Second}
	}
	rc.running = true
	go c.run(room, rc, rc.failures+1, clean)
	return cleanupOutcome{pending: true, failures: rc.failures}
}

// run makes one try once a slot is free, bounded by redisCleanupTimeout from then, and asks for the
// room's reconcile with its outcome.
func (c *redisCleanups) run(room types.NamespacedName, rc *redisCleanup, try int, clean cleaner) {
	if c.slots != nil {
		c.slots <- struct{}{}
		defer func() { <-c.slots }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisCleanupTimeout)
	err := clean(ctx, try)
	cancel()
	c.mu.Lock()
	rc.running, rc.finished, rc.err = false, true, err
	c.mu.Unlock()
	if c.notify != nil {
		c.notify(room)
	}
}

// forget drops what is kept of uid's cleanup, for a room that is gone. A try on its way ends as it
// would, unheard.
func (c *redisCleanups) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byRoom, uid)
}

// deleteRedisKeys deletes wq's keys from its Redis, within ctx's bound (redisCleanups.run). The Redis
// is the one its spec names now; if the Secret that names it is gone, or no longer names one, it is
// where the room last ran: lastURL, as its last reconcile found it, or else the URL the room's own
// Secret holds for its proxies. Deleting one manifest that holds the room and its Redis Secret
// deletes the Secret first as often as not.
func (r *WaitingQueueReconciler) deleteRedisKeys(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, lastURL string) error {
	url, err := r.redisURL(ctx, wq)
	if errors.As(err, new(errRedisConfig)) {
		if lastURL == "" {
			lastURL = r.ownSecretRedisURL(ctx, wq)
		}
		if lastURL != "" {
			url, err = lastURL, nil
		}
	}
	if err != nil {
		return err
	}
	store, release, err := r.Pool.Acquire(url)
	if err != nil {
		return err
	}
	defer release()
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		return err
	}
	return q.Delete(ctx)
}

// ownSecretRedisURL is the Redis URL the room's own Secret holds for its proxies; "" when it cannot
// be read.
func (r *WaitingQueueReconciler) ownSecretRedisURL(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) string {
	own := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, own); err != nil {
		return ""
	}
	return string(own.Data[herdgatev1alpha1.SecretRedisURL])
}
