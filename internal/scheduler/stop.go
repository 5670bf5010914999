package scheduler

import "k8s.io/apimachinery/pkg/types"

// Remove stops the queue's goroutine and waits until it has returned.
func (s *Scheduler) Remove(uid types.UID) { <-s.Stop(uid) }

// StopNamed stops the goroutines of the queues named key, whatever their UIDs, as Stop does, for a
// queue that is gone.
func (s *Scheduler) StopNamed(key types.NamespacedName) {
	s.mu.Lock()
	uids := s.named(key)
	s.mu.Unlock()
	for _, uid := range uids {
		s.Stop(uid)
	}
}

// Stop stops the queue's goroutine without waiting for it: it begins no tick from now on, though a
// round trip to Redis it has on its way ends in its own time. returned is closed once the goroutine
// has returned and the queue's metrics are gone, unless a queue of the same name runs by then; a queue
// the scheduler does not run is returned at once.
func (s *Scheduler) Stop(uid types.UID) (returned <-chan struct{}) {
	s.mu.Lock()
	r := s.runners[uid]
	delete(s.runners, uid)
	s.mu.Unlock()
	done := make(chan struct{})
	if r == nil {
		close(done)
		return done
	}
	// launch set cancel and done under s.mu, before r could be found in s.runners.
	if r.cancel != nil {
		r.cancel()
	}
	go func() {
		defer close(done)
		if r.done != nil {
			<-r.done
		}
		// A room of the same name may run again by now (deleted and made anew): the series are its
		// own, made when its goroutine began, and deleting them would leave it writing to none.
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.named(r.key)) == 0 {
			forgetQueueMetrics(r.key.Namespace, r.key.Name)
		}
	}()
	return done
}

// named are the UIDs of the queues named key the scheduler runs; s.mu is held.
func (s *Scheduler) named(key types.NamespacedName) []types.UID {
	var uids []types.UID
	for uid, r := range s.runners {
		if r.key == key {
			uids = append(uids, uid)
		}
	}
	return uids
}
