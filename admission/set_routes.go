package admission

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/herdgate/herdgate/internal/route"
)

// How a shared proxy set picks a request's room: by host, and where rooms share a host by the most
// specific protected route (docs/guides/proxy-sets.md). reroute rebuilds the table whenever a room
// comes, goes or changes; Set.Room reads it on every request.

// hostRooms are the rooms served on one host, the one created first first.
type hostRooms struct {
	host  string
	rooms []*Room
}

// pick is the room of a request to a host several rooms share: the room with the most specific
// protected route for it (route.Specificity), a route for the request's method before one for
// another, and the room created first on a tie or when none matches. herdgate's own paths go to the
// room their room parameter names (the waiting page and the enter links add it), else to the room of
// the page their return parameter names.
func (hr *hostRooms) pick(method, target string) *Room {
	p, rawQuery, _ := strings.Cut(target, "?")
	canonical, err := route.Normalize(p)
	if err != nil || !strings.HasPrefix(p, "/") {
		return hr.rooms[0] // its gate answers the bad path
	}
	if isReserved(canonical) {
		values, _ := url.ParseQuery(rawQuery)
		if id := values.Get(RoomParam); id != "" {
			for _, r := range hr.rooms {
				if r.links.roomID == id {
					return r
				}
			}
		}
		back, _, _ := strings.Cut(values.Get("return"), "?")
		if canonical, err = route.Normalize(back); err != nil || !strings.HasPrefix(back, "/") {
			return hr.rooms[0]
		}
		method = http.MethodGet
	}
	method = strings.ToUpper(method)
	best, bestScore := hr.rooms[0], -1
	for _, r := range hr.rooms {
		cfg := r.Config()
		if cfg == nil {
			continue
		}
		for _, rt := range cfg.Routes {
			if !rt.MatchesHost(hr.host) || !rt.MatchesPath(canonical) {
				continue
			}
			// A route for the method outranks any for another; within each, the most specific.
			score := rt.Specificity()
			if rt.Methods[method] {
				score += 1 << 20
			}
			if score > bestScore {
				best, bestScore = r, score
			}
		}
	}
	return best
}

// hostOnly drops a port and a final dot: "Shop.Example.:8443" is "Shop.Example".
func hostOnly(host []byte) []byte {
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && bytes.IndexByte(host[i:], ']') < 0 {
		host = host[:i]
	}
	host = bytes.TrimSuffix(host, []byte("."))
	return host
}

func hasUpper(b []byte) bool {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// reroute rebuilds the routes from the rooms' configs in force: each host goes to the rooms that name
// it, the oldest first (then the first by name), and a room that protects a route an older room of
// the host protects already has its generation refused. s.mu is held.
func (s *Set) reroute() {
	order := make([]*setRoom, 0, len(s.rooms))
	for _, r := range s.rooms {
		order = append(order, r)
	}
	slices.SortFunc(order, func(a, b *setRoom) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.room.name, b.room.name)
	})
	routes := map[string]*hostRooms{}
	for _, r := range order {
		cfg := r.room.Config()
		r.hosts = nil
		if cfg == nil {
			continue
		}
		conflict := ""
		for _, h := range cfg.Hosts {
			hr := routes[h]
			if hr == nil {
				hr = &hostRooms{host: h}
				routes[h] = hr
			}
			if c := sameRoute(hr, cfg); c != "" && conflict == "" {
				conflict = c
			}
			hr.rooms = append(hr.rooms, r.room)
			r.hosts = append(r.hosts, h)
		}
		if conflict != "" && conflict != r.conflict {
			r.room.RefuseConfig(cfg.Generation, fmt.Errorf("%s", conflict))
		}
		r.conflict = conflict
	}
	for _, r := range s.rooms {
		shared := false
		for _, h := range r.hosts {
			shared = shared || len(routes[h].rooms) > 1
		}
		r.room.links.sharesHost.Store(shared)
	}
	s.routes.Store(&routes)
}

// sameRoute says which protected route of cfg a room already on hr protects on its host, "" when
// none: the room created first keeps the route (pick prefers it on a tie).
func sameRoute(hr *hostRooms, cfg *Config) string {
	for i, mine := range cfg.Routes {
		if !mine.MatchesHost(hr.host) {
			continue
		}
		for _, other := range hr.rooms {
			ocfg := other.Config()
			if ocfg == nil {
				continue
			}
			for _, theirs := range ocfg.Routes {
				if mine.Same(theirs) {
					return fmt.Sprintf("spec.protectedRoutes[%d]: WaitingQueue %s of the same proxy set protects the same route on host %s, and was created first", i, other.name, hr.host)
				}
			}
		}
	}
	return ""
}
