package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// SetWatchOptions configure WatchSet.
type SetWatchOptions struct {
	// Dir is where the set's Secret is mounted: each room's HMAC key, Redis URL and the copies of the
	// values it refers to, under herdgatev1alpha1.ProxySetKey(room, key).
	Dir string
	// Store returns the store of a Redis URL; WatchSet asks once per URL and room.
	Store func(url string) (*queue.Store, error)
	// Proxy tunes the rooms' proxies (the replica's name, the clock).
	Proxy admission.Options
	// Resync rebuilds the configs this often even when nothing changed; 0 means DefaultResync.
	Resync time.Duration
	Log    logr.Logger
}

// WatchSet serves, in set, the WaitingQueues of namespace that name the shared proxy set name
// (spec.proxy.shared): a room that joins is added, one that leaves removed, and each room's changes
// applied live as WatchRoom does for a proxy of its own. A room whose values are not mounted yet
// (the kubelet copies a changed Secret within a minute or so) waits, its generation refused with the
// reason, until they are. WatchSet returns when ctx ends, or with an error when the watch cannot be
// set up.
func WatchSet(ctx context.Context, cfg *rest.Config, namespace, name string, set *admission.Set, opts SetWatchOptions) error {
	c, changed, errs, err := watchQueues(ctx, cfg, namespace, fields.Everything())
	if err != nil {
		return fmt.Errorf("watching the WaitingQueues of namespace %s: %w", namespace, err)
	}
	if c == nil {
		return <-errs
	}
	w := &setWatch{opts: opts, set: set, read: c, namespace: namespace, name: name, rooms: map[string]*setMember{}, waiting: map[string]string{}}
	return keepUpdating(ctx, changed, errs, opts.Resync, w.update)
}

// setWatch keeps an admission.Set in line with the rooms that name it.
type setWatch struct {
	opts            SetWatchOptions
	set             *admission.Set
	read            client.Reader
	namespace, name string
	rooms           map[string]*setMember // by name
	// waiting says why each room that cannot be served yet waits, as logged last.
	waiting map[string]string
}

// setMember is a room of the set: its proxy's Redis and the watch of its config.
type setMember struct {
	uid      types.UID
	redisURL string
	watch    queueWatch
}

func (w *setWatch) update(ctx context.Context) {
	list := &herdgatev1alpha1.WaitingQueueList{}
	if err := w.read.List(ctx, list, client.InNamespace(w.namespace)); err != nil {
		if ctx.Err() == nil {
			w.opts.Log.Info("Cannot list the WaitingQueues; keeping the rooms in force", "namespace", w.namespace, "error", err.Error())
		}
		return
	}
	seen := map[string]bool{}
	for i := range list.Items {
		wq := &list.Items[i]
		if wq.Spec.ProxySet() != w.name || !wq.DeletionTimestamp.IsZero() {
			continue
		}
		seen[wq.Name] = true
		m, err := w.member(wq)
		if err != nil {
			// Said once per reason: the watch asks again at every change and resync.
			if w.waiting[wq.Name] != err.Error() {
				w.opts.Log.Info("Cannot serve the room yet", "waitingqueue", wq.Namespace+"/"+wq.Name, "reason", err.Error())
				w.waiting[wq.Name] = err.Error()
			}
			continue
		}
		delete(w.waiting, wq.Name)
		m.watch.update(ctx)
	}
	for name := range w.waiting {
		if !seen[name] {
			delete(w.waiting, name)
		}
	}
	for name := range w.rooms {
		if !seen[name] {
			w.opts.Log.Info("The room left the proxy set", "waitingqueue", w.namespace+"/"+name)
			w.set.Remove(w.namespace + "/" + name)
			delete(w.rooms, name)
		}
	}
}

// member is the room of wq, added to the set when it joins, or made anew when it is another object
// of the same name or its Redis changed.
func (w *setWatch) member(wq *herdgatev1alpha1.WaitingQueue) (*setMember, error) {
	url, err := w.value(wq.Name, herdgatev1alpha1.SecretRedisURL)
	if err != nil {
		return nil, fmt.Errorf("reading the room's Redis URL: %w", err)
	}
	redisURL := strings.TrimSpace(string(url))
	if m, ok := w.rooms[wq.Name]; ok && m.uid == wq.UID && m.redisURL == redisURL {
		return m, nil
	}
	store, err := w.opts.Store(redisURL)
	if err != nil {
		return nil, fmt.Errorf("the room's Redis URL: %w", err)
	}
	room, err := admission.NewUnconfiguredRoom(wq.Namespace, wq.Name, store, w.opts.Proxy)
	if err != nil {
		return nil, err
	}
	roomName := wq.Namespace + "/" + wq.Name
	name := wq.Name
	m := &setMember{uid: wq.UID, redisURL: redisURL}
	m.watch = queueWatch{key: types.NamespacedName{Namespace: wq.Namespace, Name: wq.Name}, read: w.read, opts: WatchOptions{
		HMACKey: func() ([]byte, error) { return w.value(name, herdgatev1alpha1.SecretHMACKey) },
		Values:  func(key string) ([]byte, error) { return w.value(name, key) },
		Apply:   func(cfg *admission.Config) { w.set.Configure(roomName, cfg) },
		Refuse:  room.RefuseConfig,
		Log:     w.opts.Log.WithValues("waitingqueue", roomName),
	}}
	w.set.Add(room, wq.CreationTimestamp.Time)
	w.rooms[wq.Name] = m
	w.opts.Log.Info("The room joined the proxy set", "waitingqueue", roomName)
	return m, nil
}

// value reads the copy of room's key in the mounted Secret.
func (w *setWatch) value(room, key string) ([]byte, error) {
	v, err := os.ReadFile(filepath.Join(w.opts.Dir, herdgatev1alpha1.ProxySetKey(room, key)))
	if err != nil {
		return nil, fmt.Errorf("the proxy set's Secret holds no %s for the room yet: %w", key, err)
	}
	return v, nil
}
