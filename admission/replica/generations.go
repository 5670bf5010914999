package replica

import "time"

// generations is a bounded memory of one shard: two generations of a map. A put starts a new
// generation, dropping the previous one, when the current one holds most entries or is older than
// every; an entry is so remembered at least until its generation's successor is dropped. Not safe for
// concurrent use: its owner holds a lock.
type generations[K comparable, V any] struct {
	current, previous map[K]V
	since             time.Time
}

func (g *generations[K, V]) get(k K) (V, bool) {
	if v, ok := g.current[k]; ok {
		return v, true
	}
	v, ok := g.previous[k]
	return v, ok
}

func (g *generations[K, V]) put(k K, v V, now time.Time, most int, every time.Duration) {
	if g.current == nil || len(g.current) >= most || now.Sub(g.since) >= every {
		g.previous, g.current, g.since = g.current, make(map[K]V, len(g.current)), now
	}
	g.current[k] = v
	delete(g.previous, k)
}

func (g *generations[K, V]) drop(k K) {
	delete(g.current, k)
	delete(g.previous, k)
}

func (g *generations[K, V]) len() int { return len(g.current) + len(g.previous) }

// reset forgets everything.
func (g *generations[K, V]) reset() { g.current, g.previous = nil, nil }
