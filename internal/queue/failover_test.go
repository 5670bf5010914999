package queue

import (
	"context"
	"testing"
	"time"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestAFailoverWatchTellsFailoversFromOtherPrimaries: a primary that names a known one as its
// predecessor is a promotion; behind one address or Sentinel master a primary with no known history
// started afresh; a Cluster's other masters and replicas are neither.
func TestAFailoverWatchTellsFailoversFromOtherPrimaries(t *testing.T) {
	now := time.Now()
	primary := func(id, prior string) replication { return replication{primary: true, replid: id, prior: prior} }

	one := NewFailoverWatch()
	one.onePrimary = true
	changed := one.Changed()
	for _, r := range []replication{primary("a", ""), primary("a", ""), {primary: false, replid: "x"}} {
		one.saw(r, now)
	}
	if got := one.Last(); got.Epoch != 0 {
		t.Fatalf("the first primary, again, and a replica: %+v, want no failover", got)
	}
	one.saw(primary("b", "a"), now)
	if got := one.Last(); got.Epoch != 1 || !got.Promoted || !got.At.Equal(now) {
		t.Fatalf("a replica of a promoted: %+v, want failover 1, promoted", got)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed did not close at the failover")
	}
	one.saw(primary("c", ""), now)
	if got := one.Last(); got.Epoch != 2 || got.Promoted {
		t.Fatalf("a primary with no history after b: %+v, want failover 2, not promoted", got)
	}

	cluster := NewFailoverWatch()
	for _, r := range []replication{primary("m1", ""), primary("m2", ""), primary("m3", "")} {
		cluster.saw(r, now)
	}
	if got := cluster.Last(); got.Epoch != 0 {
		t.Fatalf("three Cluster masters: %+v, want no failover", got)
	}
	cluster.saw(primary("r2", "m2"), now)
	if got := cluster.Last(); got.Epoch != 1 || !got.Promoted {
		t.Fatalf("m2's replica promoted: %+v, want failover 1", got)
	}
	var nilWatch *FailoverWatch
	if nilWatch.Last().Epoch != 0 || nilWatch.Changed() != nil {
		t.Fatal("a nil watch must tell no failover")
	}
}

func TestParseReplication(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_replid:6f1d\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n"
	if got := parseReplication(info); !got.primary || got.replid != "6f1d" || got.prior != "" {
		t.Fatalf("%+v", got)
	}
	info = "role:master\nmaster_replid:77aa\nmaster_replid2:6f1d\n"
	if got := parseReplication(info); got.prior != "6f1d" {
		t.Fatalf("%+v", got)
	}
}

// TestAFailoverWatchSeesARestartWithoutData: a single Redis restarted empty is a failover that was
// not a promotion.
func TestAFailoverWatchSeesARestartWithoutData(t *testing.T) {
	r := testenv.StartRedis(t)
	w := NewFailoverWatch()
	rdb, err := NewClient(r.URL(), ClientOptions{Failovers: w})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(ctx).Err() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no answer after the restart")
		}
	}
	if got := w.Last(); got.Epoch != 1 || got.Promoted {
		t.Fatalf("after a restart without data: %+v, want failover 1, not promoted", got)
	}
}

// TestAdmitFindsAnotherPrimary: a tick tells the replication id of its server; a tick sent with
// another one (its client followed a failover within the call) admits nobody and says so.
func TestAdmitFindsAnotherPrimary(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, startClient(t))
	enterAll(t, q, "a", "b")
	first, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil || len(first.Admitted) != 1 || first.Primary == "" || first.FailedOver {
		t.Fatalf("the first tick: %+v, %v; want one admitted and the primary's id", first, err)
	}
	moved, err := q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 1, PassTTL: passTTL, AbandonAfter: longAbandon, Primary: "a-primary-before-a-failover"})
	if err != nil || !moved.FailedOver || len(moved.Admitted) != 0 || moved.Primary != first.Primary {
		t.Fatalf("a tick on another primary: %+v, %v; want nobody admitted, failed over to %s", moved, err, first.Primary)
	}
	again, err := q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 1, PassTTL: passTTL, AbandonAfter: longAbandon, Primary: first.Primary})
	if err != nil || len(again.Admitted) != 1 || again.FailedOver {
		t.Fatalf("the same tick on the primary it knows: %+v, %v; want one admitted", again, err)
	}
}
