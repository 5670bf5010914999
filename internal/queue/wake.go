package queue

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// WakeChannel is the Redis channel on which Enter names (by key prefix) a sleeping room in which a
// visitor took a place, so that its scheduler ticks again at the next grid point instead of at the
// end of its sleep (AdmitRequest.SleepFor). A message can be lost (a subscriber reconnecting): the
// room then wakes at the end of its sleep, a couple of seconds later.
const WakeChannel = "herdgate:wake"

// Wakes hands the wake-ups of one Redis to the rooms that listen for them. One subscription serves
// every room of the Redis; it starts with the first listener and ends when the store closes.
type Wakes struct {
	rdb redis.UniversalClient

	mu        sync.Mutex
	listeners map[string]chan struct{}
	sub       *redis.PubSub
	stop      context.CancelFunc
	done      chan struct{}
}

// Listen returns a channel that receives a value when queue q's room is woken, and a function that
// stops listening. A wake-up that finds the last one not yet taken is folded into it.
func (w *Wakes) Listen(q *Queue) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listeners == nil {
		w.listeners = map[string]chan struct{}{}
	}
	if w.sub == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.sub, w.stop, w.done = w.rdb.Subscribe(ctx, WakeChannel), cancel, make(chan struct{})
		go w.deliver(w.sub, w.done)
	}
	ch := make(chan struct{}, 1)
	w.listeners[q.prefix] = ch
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.listeners[q.prefix] == ch {
			delete(w.listeners, q.prefix)
		}
	}
}

func (w *Wakes) deliver(sub *redis.PubSub, done chan struct{}) {
	defer close(done)
	for msg := range sub.Channel() {
		w.mu.Lock()
		ch := w.listeners[msg.Payload]
		w.mu.Unlock()
		if ch != nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// close ends the subscription.
func (w *Wakes) close() {
	w.mu.Lock()
	sub, stop, done := w.sub, w.stop, w.done
	w.sub = nil
	w.mu.Unlock()
	if sub == nil {
		return
	}
	stop()
	_ = sub.Close()
	<-done
}
