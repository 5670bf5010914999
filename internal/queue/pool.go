package queue

import "sync"

// Pool shares one Redis client (and queue store) per distinct Redis URL among the queues that use
// it, and closes it when the last one lets go. The zero Pool is ready to use.
type Pool struct {
	// Options are applied to every client the pool builds.
	Options ClientOptions

	mu      sync.Mutex
	entries map[string]*poolEntry
}

type poolEntry struct {
	store *Store
	refs  int
}

// Acquire returns the store for url; call release exactly once when done with it.
func (p *Pool) Acquire(url string) (store *Store, release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries == nil {
		p.entries = map[string]*poolEntry{}
	}
	e := p.entries[url]
	if e == nil {
		opts := p.Options
		opts.Failovers = NewFailoverWatch()
		rdb, err := NewClient(url, opts)
		if err != nil {
			return nil, nil, err
		}
		e = &poolEntry{store: NewStore(rdb, StoreOptions{Failovers: opts.Failovers})}
		p.entries[url] = e
	}
	e.refs++
	var once sync.Once
	return e.store, func() { once.Do(func() { p.release(url, e) }) }, nil
}

func (p *Pool) release(url string, e *poolEntry) {
	p.mu.Lock()
	e.refs--
	last := e.refs == 0
	if last {
		delete(p.entries, url)
	}
	p.mu.Unlock()
	if last {
		e.store.Close()
		_ = e.store.Client().Close()
	}
}

// Len is the number of open clients.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}
