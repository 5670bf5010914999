package admission

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/herdgate/herdgate/internal/route"
)

// Rooms is what a front serves: the room a request is for, and the state of the whole server. A
// *Room is one room, whatever the host; a *Set is a shared proxy set's rooms, by host.
type Rooms interface {
	// Room is the room of a request with this method and target (as sent) to host, the Host header as
	// sent (port and letter case included); nil when no room is served there.
	Room(host, method, target []byte) *Room
	// Named is the room namespace/name, for checks that name it (Envoy's context_extensions).
	Named(name string) (*Room, bool)
	Draining() bool
	// Ready says the rooms serve: not draining, and with a config in force (one, for a set).
	Ready() bool
	StartDrain()
	Log() logr.Logger
	MetricsHandler() http.Handler
	// Run keeps what the rooms do beside answering requests until ctx ends (Room.Run).
	Run(ctx context.Context, redisCheckInterval time.Duration)
}

// Room is r, whatever the host: a proxy of its own serves its room on any host.
func (r *Room) Room(_, _, _ []byte) *Room { return r }

// Ready says r serves: it has a config and is not draining.
func (r *Room) Ready() bool { return r.cfg.Load() != nil && !r.draining.Load() }

// Named is r when name is its room's, or is "" (the one room there is).
func (r *Room) Named(name string) (*Room, bool) { return r, name == "" || name == r.name }

// Set is the rooms of a shared proxy set (spec.proxy.shared): one server, a Room each, each with
// its own config, keys, Redis and metrics, and a request's room picked by its host and, where rooms
// share a host, by the most specific protected route (hostRooms.pick). Two rooms may not protect the
// same route on one host: the room created first keeps it and the other's generation is refused,
// saying why, so that its Programmed condition tells its owner.
type Set struct {
	log      logr.Logger
	draining atomic.Bool
	// routes maps a host to its rooms; it is replaced whole when a room comes, goes or changes hosts.
	routes atomic.Pointer[map[string]*hostRooms]

	mu    sync.Mutex
	rooms map[string]*setRoom // by namespace/name
	// runCtx and interval are Run's, for rooms that come while it runs.
	runCtx   context.Context
	interval time.Duration
	running  sync.WaitGroup
	// registry holds the process's own series, once for all rooms.
	registry *prometheus.Registry
}

type setRoom struct {
	room    *Room
	created time.Time
	// hosts are the hosts of the room's config in force; conflict is the host another room holds,
	// with the generation it was refused for.
	hosts    []string
	conflict string
	stop     context.CancelFunc
}

// NewSet is an empty set.
func NewSet(log logr.Logger) *Set {
	s := &Set{log: log, rooms: map[string]*setRoom{}, registry: prometheus.NewRegistry()}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	empty := map[string]*hostRooms{}
	s.routes.Store(&empty)
	return s
}

// Room picks the room by host (without a port or a final dot, in any letter case) and, when rooms
// share the host, by the request's method and target.
func (s *Set) Room(host, method, target []byte) *Room {
	routes := *s.routes.Load()
	host = hostOnly(host)
	hr, ok := routes[string(host)]
	if !ok && hasUpper(host) {
		hr, ok = routes[string(bytes.ToLower(host))]
	}
	if !ok {
		return nil
	}
	if len(hr.rooms) == 1 {
		return hr.rooms[0]
	}
	return hr.pick(string(method), string(target))
}

// Named is the room namespace/name, when the set serves it.
func (s *Set) Named(name string) (*Room, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rooms[name]
	if !ok {
		return nil, false
	}
	return r.room, true
}

// Draining says StartDrain was called.
func (s *Set) Draining() bool { return s.draining.Load() }

// StartDrain makes readyz fail, for every room.
func (s *Set) StartDrain() {
	s.draining.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rooms {
		r.room.StartDrain()
	}
}

// Ready says the set is not draining and serves at least one room with a config in force.
func (s *Set) Ready() bool {
	if s.draining.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rooms {
		if r.room.Config() != nil {
			return true
		}
	}
	return false
}

// AnswerUnrouted is the answer to a request to a host on which no room of rooms is served: the
// probes, which the kubelet sends to the pod's own address, and 421 with a JSON body for anything
// else, as for a request that reached a server not configured for its host.
func AnswerUnrouted(rooms Rooms, escapedPath string) RoomAnswer {
	return RoomAnswer{unrouted(rooms, escapedPath), nil}
}

// unrouted is the answer of AnswerUnrouted.
func unrouted(rooms Rooms, escapedPath string) answer {
	switch canonical, _ := route.Normalize(escapedPath); canonical {
	case reservedPrefix + "/healthz":
		return jsonAnswer(http.StatusOK, map[string]string{"status": "ok"})
	case reservedPrefix + "/readyz":
		if !rooms.Ready() {
			return jsonAnswer(http.StatusServiceUnavailable, map[string]string{"status": "not_ready"})
		}
		return jsonAnswer(http.StatusOK, map[string]string{"status": "ready"})
	}
	return errorAnswer(http.StatusMisdirectedRequest, errorBody{Error: "unknown_host", Message: "no waiting room of this proxy set is served on the request's host"})
}

// Log is the set's logger.
func (s *Set) Log() logr.Logger { return s.log }

// Add serves room, created at created (which settles who holds a host both name), on the hosts of
// its config in force: give it configs with Configure. A room the set serves already is replaced.
func (s *Set) Add(room *Room, created time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.rooms[room.name]; ok && old.stop != nil {
		old.stop()
	}
	r := &setRoom{room: room, created: created}
	s.rooms[room.name] = r
	if s.runCtx != nil {
		s.start(r)
	}
	s.reroute()
}

// Configure applies cfg to the room name (namespace/name) and serves it on cfg's hosts; false when the
// set does not serve the room.
func (s *Set) Configure(name string, cfg *Config) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rooms[name]
	if !ok {
		return false
	}
	r.room.SetConfig(cfg)
	r.conflict = ""
	s.reroute()
	return true
}

// Remove stops serving the room name (namespace/name).
func (s *Set) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rooms[name]
	if !ok {
		return
	}
	if r.stop != nil {
		r.stop()
	}
	delete(s.rooms, name)
	s.reroute()
}

// Names are the rooms the set serves, as namespace/name, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.rooms))
	for q := range s.rooms {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// Run runs every room's Room.Run until ctx ends, and those of rooms added meanwhile.
func (s *Set) Run(ctx context.Context, redisCheckInterval time.Duration) {
	s.mu.Lock()
	s.runCtx, s.interval = ctx, redisCheckInterval
	for _, r := range s.rooms {
		s.start(r)
	}
	s.mu.Unlock()
	<-ctx.Done()
	s.running.Wait()
}

// start runs r's loops; s.mu is held.
func (s *Set) start(r *setRoom) {
	ctx, stop := context.WithCancel(s.runCtx)
	r.stop = stop
	s.running.Go(func() { r.room.Run(ctx, s.interval) })
}

// MetricsHandler serves every room's series, each labelled waitingqueue="namespace/name" as a proxy
// of its own labels its room's, and the process's own once.
func (s *Set) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{s.registry, prometheus.GathererFunc(s.gatherRooms)}, promhttp.HandlerOpts{})
}

// roomLabel names a room in a set's series.
const roomLabel = "waitingqueue"

func (s *Set) gatherRooms() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	rooms := make([]*Room, 0, len(s.rooms))
	for _, r := range s.rooms {
		rooms = append(rooms, r.room)
	}
	s.mu.Unlock()
	return gatherLabelled(rooms)
}

// gatherLabelled gathers the rooms' series into one family per metric, each series labelled with its
// room (roomLabel).
func gatherLabelled(rooms []*Room) ([]*dto.MetricFamily, error) {
	byName := map[string]*dto.MetricFamily{}
	for _, p := range rooms {
		families, err := p.metrics.roomRegistry.Gather()
		if err != nil {
			return nil, err
		}
		for _, f := range families {
			merged, ok := byName[f.GetName()]
			if !ok {
				merged = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
				byName[f.GetName()] = merged
			}
			for _, m := range f.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(roomLabel), Value: proto.String(p.name)})
				merged.Metric = append(merged.Metric, m)
			}
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	return out, nil
}
