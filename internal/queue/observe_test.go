package queue

import (
	"cmp"
	"context"
	"reflect"
	"testing"
	"time"
)

// TestATicksReadsReadWhatTheSeparateReadsRead: the reads of a tick's round trip return the counters,
// the proxy replicas' reports and the workload reports that Stats, ProxyReports and ReadWorkload
// return, also on a Redis that lost its scripts.
func TestATicksReadsReadWhatTheSeparateReadsRead(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	enterAll(t, q, "a", "b", "c")
	if err := q.ReportProxy(ctx, ProxyReport{Replica: "proxy-0", Generation: 3}); err != nil {
		t.Fatal(err)
	}
	second := time.Now().Unix()
	if err := q.ReportWorkload(ctx, WorkloadReport{Replica: "proxy-0", Epoch: "e1", ElapsedMicros: 1_000_000, Requests: 12, LatencyMicros: 120_000},
		[]PassUse{{Second: second, ID: "a@1"}, {Second: second, ID: "b@1"}}); err != nil {
		t.Fatal(err)
	}
	// observe reads req in a tick that admits nobody.
	tick := int64(0)
	observe := func(req ObserveRequest) (Observation, error) {
		tick++
		r := q.Tick(ctx, TickCalls{Admit: AdmitRequest{TickID: tick, PassTTL: time.Minute, AbandonAfter: time.Hour}, Observe: &req})
		return r.Observation, cmp.Or(r.AdmitErr, r.ObserveErr)
	}
	req := ObserveRequest{ProxyMaxAge: time.Minute, Workload: true, WorkloadMaxAge: time.Minute, UsedSeconds: []int64{second, second - 1}}

	check := func(what string) {
		t.Helper()
		got, err := observe(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		stats, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		proxies, err := q.ProxyReports(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		workload, err := q.ReadWorkload(ctx, time.Minute, req.UsedSeconds)
		if err != nil {
			t.Fatal(err)
		}
		got.Stats.Now, stats.Now = time.Time{}, time.Time{} // Redis' clock moved between the reads
		got.Workload.Now, workload.Now = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got.Stats, stats) || got.Stats.Depth != 3 {
			t.Errorf("%s: stats %+v, want %+v with 3 waiting", what, got.Stats, stats)
		}
		if !reflect.DeepEqual(got.Proxies, proxies) || len(got.Proxies) != 1 || got.Proxies[0].Generation != 3 {
			t.Errorf("%s: proxy reports %+v, want %+v", what, got.Proxies, proxies)
		}
		if got.Workload == nil || !reflect.DeepEqual(*got.Workload, workload) || got.Workload.Used[second] != 2 || len(got.Workload.Reports) != 1 {
			t.Errorf("%s: workload %+v, want %+v with 2 passes used", what, got.Workload, workload)
		}
	}
	check("scripts loaded")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	check("after SCRIPT FLUSH")

	if got, err := observe(ObserveRequest{ProxyMaxAge: time.Minute}); err != nil || got.Workload != nil || got.Stats.Depth != 3 {
		t.Fatalf("without the workload: %+v, %v", got, err)
	}
}
