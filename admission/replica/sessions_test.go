package replica

import (
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

func passOf(visitor string, nb time.Time) pass.Pass {
	return pass.Pass{Visitor: visitor, NotBefore: nb, Expiry: nb.Add(time.Minute)}
}

// TestSessionsReleaseAtOnceAndOweRedisOnce: a released pass is refused here at once and wakes the
// sync; it is owed to Redis once however often it is released; a renewal of it is dropped, and a
// renewal of another pass keeps only its latest expiry.
func TestSessionsReleaseAtOnceAndOweRedisOnce(t *testing.T) {
	s := NewSessions()
	nb := time.UnixMilli(1_700_000_000_000)
	ada, bea := passOf("ada", nb), passOf("bea", nb)
	if s.IsRevoked(ada) {
		t.Fatal("a pass nobody released is revoked")
	}
	s.Renew(ada, nb.Add(2*time.Minute))
	s.Release(ada)
	s.Release(ada)
	if !s.IsRevoked(ada) || s.IsRevoked(bea) {
		t.Fatalf("after releasing ada: ada revoked %v, bea revoked %v", s.IsRevoked(ada), s.IsRevoked(bea))
	}
	select {
	case <-s.Due():
	default:
		t.Fatal("a release did not wake the sync")
	}
	s.Renew(ada, nb.Add(3*time.Minute)) // a released pass is not renewed
	s.Renew(bea, nb.Add(3*time.Minute))
	s.Renew(bea, nb.Add(2*time.Minute)) // an earlier expiry loses
	releases, renewals, seq := s.Take()
	if len(releases) != 1 || releases[0] != (queue.Release{PassRef: queue.PassRef{Visitor: "ada", NotBefore: nb}, Expiry: ada.Expiry}) || seq != 0 {
		t.Fatalf("releases %v (seq %d), want ada's once", releases, seq)
	}
	if len(renewals) != 1 || renewals[0].Visitor != "bea" || !renewals[0].Expiry.Equal(nb.Add(3*time.Minute)) {
		t.Fatalf("renewals %v, want bea's to +3m", renewals)
	}
	if r, n, _ := s.Take(); len(r) != 0 || len(n) != 0 {
		t.Fatalf("owed twice: %v %v", r, n)
	}
	// The call failed: what it carried is owed again; a newer renewal meanwhile wins.
	s.Renew(bea, nb.Add(4*time.Minute))
	s.GiveBack(releases, renewals)
	releases, renewals, _ = s.Take()
	if len(releases) != 1 || len(renewals) != 1 || !renewals[0].Expiry.Equal(nb.Add(4*time.Minute)) {
		t.Fatalf("after giving back: %v %v", releases, renewals)
	}
}

// TestSessionsLearnWhatOtherReplicasReleased: revocations Redis lists are refused from then on, the
// sequence follows them (and the call's own once caught up), expired ones are forgotten, and a Redis
// that lost its data, or a failover, makes the replica write back every revocation it knows.
func TestSessionsLearnWhatOtherReplicasReleased(t *testing.T) {
	s := NewSessions()
	now := time.UnixMilli(1_700_000_000_000)
	cy, dot, eve := passOf("cy", now), passOf("dot", now), passOf("eve", now)
	s.Learn(queue.SessionsResult{Revoked: []queue.Revocation{
		{PassRef: queue.PassRef{Visitor: "cy", NotBefore: now}, Expiry: cy.Expiry, Seq: 4},
		{PassRef: queue.PassRef{Visitor: "dot", NotBefore: now}, Expiry: now.Add(-time.Second), Seq: 5},
	}, Seq: 9}, now)
	if !s.IsRevoked(cy) || s.IsRevoked(dot) {
		t.Fatalf("cy revoked %v (want true), dot revoked %v (expired: want false)", s.IsRevoked(cy), s.IsRevoked(dot))
	}
	if _, _, seq := s.Take(); seq != 9 {
		t.Fatalf("sequence %d, want 9 (caught up)", seq)
	}
	full := make([]queue.Revocation, SessionsBatch)
	for i := range full {
		full[i] = queue.Revocation{PassRef: queue.PassRef{Visitor: "v", NotBefore: now.Add(time.Duration(i) * time.Millisecond)}, Expiry: now.Add(time.Hour), Seq: int64(10 + i)}
	}
	s.Learn(queue.SessionsResult{Revoked: full, Seq: 5000}, now)
	if _, _, seq := s.Take(); seq != int64(9+SessionsBatch) {
		t.Fatalf("sequence %d after a full batch, want the batch's last, %d", seq, 9+SessionsBatch)
	}
	s.Release(eve)
	s.Learn(queue.SessionsResult{Restarted: true}, now)
	if !s.IsRevoked(cy) || !s.IsRevoked(eve) {
		t.Fatalf("after Redis restarted: cy revoked %v, eve revoked %v; want both", s.IsRevoked(cy), s.IsRevoked(eve))
	}
	owed := func() map[string]time.Time {
		releases, _, seq := s.Take()
		if seq != 0 {
			t.Fatalf("sequence %d after a rewind, want 0", seq)
		}
		out := map[string]time.Time{}
		for _, r := range releases {
			if r.Visitor != "v" {
				out[r.Visitor] = r.Expiry
			}
		}
		return out
	}
	if got := owed(); len(got) != 2 || !got["cy"].Equal(cy.Expiry) || !got["eve"].Equal(eve.Expiry) {
		t.Fatalf("after Redis restarted: owed %v; want cy's and eve's revocations, with their expiries", got)
	}
	s.Rewind()
	if got := owed(); len(got) != 2 {
		t.Fatalf("after a failover: owed %v; want cy's and eve's revocations", got)
	}
}

// TestARewindOutlastsTheCallInFlight: a failover rewinds the list while a call taken before it is on
// its way; that call's answer, which listed only what came after the old sequence, does not move the
// sequence on, so the next call lists from the start.
func TestARewindOutlastsTheCallInFlight(t *testing.T) {
	s := NewSessions()
	now := time.UnixMilli(1_700_000_000_000)
	s.Learn(queue.SessionsResult{Seq: 35}, now)
	if _, _, seq := s.Take(); seq != 35 {
		t.Fatalf("sequence %d, want 35", seq)
	}
	s.Rewind()
	s.Learn(queue.SessionsResult{Seq: 38, Revoked: []queue.Revocation{{PassRef: queue.PassRef{Visitor: "fay", NotBefore: now}, Expiry: now.Add(time.Minute), Seq: 37}}}, now)
	if _, _, seq := s.Take(); seq != 0 {
		t.Fatalf("sequence %d after a rewind during a call, want 0", seq)
	}
	if !s.IsRevoked(passOf("fay", now)) {
		t.Fatal("the revocation the call listed was dropped")
	}
	s.Learn(queue.SessionsResult{Seq: 38}, now)
	if _, _, seq := s.Take(); seq != 38 {
		t.Fatalf("sequence %d after the list from the start, want 38", seq)
	}
}
