package admissiontest

import (
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// Key is the key the rooms of the kit sign with (32 bytes, the same in every test), so that a test
// can sign the passes and places it needs.
var Key = []byte("0123456789abcdef0123456789abcdef")

// ReferencePlan is the seed's reference case as the scheduler publishes it: 14 a 100 ms tick, polls
// of 0.5 to 5 s, a visitor abandoned after a minute of silence.
func ReferencePlan() queue.PublishedPlan {
	quota, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		panic(err) // a constant plan
	}
	return queue.PublishedPlan{Quota: quota, PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: time.Minute}
}

// Config is wq's config as a proxy serves it, signed with Key; a spec it refuses fails the test.
func Config(tb testing.TB, wq *herdgatev1alpha1.WaitingQueue) *admission.Config {
	tb.Helper()
	cfg, err := admission.NewConfig(wq, Key)
	if err != nil {
		tb.Fatalf("the config of %s/%s: %v", wq.Namespace, wq.Name, err)
	}
	return cfg
}

// NewRoom is the room name (namespace/name) as a proxy replica serves it, in process, on a memory
// engine that publishes ReferencePlan: a room whose decisions need no Redis. It serves cfg; with a
// nil cfg it is as a proxy is before its first valid config.
func NewRoom(name string, cfg *admission.Config, opts admission.Options) (*admission.Room, *MemoryEngine) {
	engine := NewMemoryEngine(ReferencePlan())
	room := admission.NewRoomOn(name, engine, opts)
	if cfg != nil {
		room.SetConfig(cfg)
	}
	return room, engine
}
