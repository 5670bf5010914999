package front

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// memoryRoom is a proxy of the room name (namespace/name) over a memory engine that publishes the
// reference plan (14 a 100 ms tick, polls of 0.5 to 5 s, abandoned after a minute), serving cfg when
// it is not nil: a room whose decisions need no Redis.
func memoryRoom(tb testing.TB, name string, cfg *admission.Config) (*admission.Proxy, *admissiontest.MemoryEngine) {
	tb.Helper()
	quota, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		tb.Fatal(err)
	}
	engine := admissiontest.NewMemoryEngine(queue.PublishedPlan{Quota: quota, PollMin: 500 * time.Millisecond,
		PollMax: 5 * time.Second, AbandonAfter: time.Minute})
	p := admission.NewProxyOn(name, engine, admission.Options{})
	if cfg != nil {
		p.SetConfig(cfg)
	}
	return p, engine
}

// serveFast serves p with the fast front on a loopback port until the test ends; it returns the
// front's base URL.
func serveFast(tb testing.TB, p *admission.Proxy) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := NewFast(p, FastOptions{})
	go func() { _ = f.Serve(ln) }()
	tb.Cleanup(func() { _ = f.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}
