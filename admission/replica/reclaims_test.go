package replica_test

import (
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// TestReclaimsWriteBackEachPassOnce: before a failover nothing is written back; after it the
// passes used in the minute before go at once, and each pass issued before the failover once, on its
// first use, until the passes of before it have expired; passes issued after it never.
func TestReclaimsWriteBackEachPassOnce(t *testing.T) {
	var r replica.Reclaims
	at := time.Now()
	before := pass.Pass{Visitor: "a", NotBefore: at.Add(-time.Second), Expiry: at.Add(time.Minute)}
	after := pass.Pass{Visitor: "b", NotBefore: at.Add(time.Second), Expiry: at.Add(time.Minute)}
	r.Saw(before, at.Add(-time.Second))
	if got := r.Take(at); len(got) != 0 {
		t.Fatalf("before any failover: %v, want nothing", got)
	}
	recent := queue.HeldPass{Visitor: "recent", NotBefore: at.Add(-10 * time.Second), Expiry: at.Add(50 * time.Second)}
	r.Start(at, time.Minute, []queue.HeldPass{recent, {Visitor: "later", NotBefore: at.Add(time.Millisecond)}})
	r.Saw(before, at.Add(2*time.Second))
	r.Saw(before, at.Add(3*time.Second))
	r.Saw(after, at.Add(3*time.Second))
	r.Saw(pass.Pass{Visitor: "recent", NotBefore: recent.NotBefore, Expiry: recent.Expiry}, at.Add(3*time.Second))
	got := r.Take(at.Add(4 * time.Second))
	if len(got) != 2 || got[0].Visitor != "recent" || got[1].Visitor != "a" || !got[1].Expiry.Equal(before.Expiry) {
		t.Fatalf("written back: %+v, want the recent pass, then a's once", got)
	}
	if got := r.Take(at.Add(5 * time.Second)); len(got) != 0 {
		t.Fatalf("a second take: %v, want nothing", got)
	}
	// The window ends a pass lifetime after the failover.
	r.Saw(pass.Pass{Visitor: "c", NotBefore: at.Add(-time.Second), Expiry: at.Add(2 * time.Minute)}, at.Add(2*time.Minute))
	if got := r.Take(at.Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("after the window: %v, want nothing", got)
	}
	r.Saw(before, at.Add(2*time.Minute))
	if got := r.Take(at.Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("a closed window took in %v", got)
	}
}
