package controllers

import (
	"sync"

	"github.com/herdgate/herdgate/internal/queue"
)

// RedisPool shares one Redis client (and queue store) per distinct Redis URL among the queues that
// use it, and closes it when the last one lets go.
type RedisPool struct {
	// Options are applied to every client the pool builds.
	Options queue.ClientOptions

	mu      sync.Mutex
	entries map[string]*poolEntry
}

type poolEntry struct {
	store *queue.Store
	refs  int
}

// Acquire returns the store for url; call release exactly once when done with it.
func (p *RedisPool) Acquire(url string) (store *queue.Store, release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries == nil {
		p.entries = map[string]*poolEntry{}
	}
	e := p.entries[url]
	if e == nil {
		rdb, err := queue.NewClient(url, p.Options)
		if err != nil {
			return nil, nil, err
		}
		e = &poolEntry{store: queue.NewStore(rdb, queue.StoreOptions{})}
		p.entries[url] = e
	}
	e.refs++
	var once sync.Once
	return e.store, func() { once.Do(func() { p.release(url, e) }) }, nil
}

func (p *RedisPool) release(url string, e *poolEntry) {
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
func (p *RedisPool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}
