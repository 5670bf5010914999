package kubectl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestStatusShowsTheLanes: a room with lanes shows each lane's share, depth and rate.
func TestStatusShowsTheLanes(t *testing.T) {
	wq := builder.Queue("shop", "orders").Lanes(builder.LaneByCode("members", 20, "lanes", "key")).Obj()
	wq.Status.Lanes = []herdgatev1alpha1.LaneStatus{{Name: "main", Depth: 900, AdmittedPerSecond: "112"}, {Name: "members", Depth: 40, AdmittedPerSecond: "28"}}
	var out bytes.Buffer
	if err := writeStatus(&out, wq); err != nil {
		t.Fatal(err)
	}
	want := "Lanes:         main (80 %) 900 waiting, 112 a second; members (20 %) 40 waiting, 28 a second"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("status without the lanes as %q:\n%s", want, out.String())
	}
}

// TestStatusSaysWhoEnforcesTheRoom: a Gateway room shows how often its gateways ask the check, and
// why that is not known to be enough; a Proxy room says its proxy forwards.
func TestStatusSaysWhoEnforcesTheRoom(t *testing.T) {
	gateway := func(checks string, status metav1.ConditionStatus, reason string) *herdgatev1alpha1.WaitingQueue {
		wq := builder.Queue("shop", "orders").Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
		wq.Status.GatewayChecksPerSecond = checks
		wq.Status.Conditions = []metav1.Condition{{Type: herdgatev1alpha1.ConditionGatewayChecking, Status: status, Reason: reason}}
		return wq
	}
	for _, c := range []struct {
		name string
		wq   *herdgatev1alpha1.WaitingQueue
		want string
	}{
		{"a Proxy room", builder.Queue("shop", "orders").Obj(), "Enforcement:   Proxy: the admission proxy forwards admitted visitors\n"},
		{"a Gateway room whose gateways ask", gateway("41.5", metav1.ConditionTrue, herdgatev1alpha1.ReasonChecking),
			"Enforcement:   Gateway: the gateways ask the check 41.5 times a second\n"},
		{"a Gateway room whose gateways do not ask", gateway("0", metav1.ConditionFalse, herdgatev1alpha1.ReasonNoChecks),
			"Enforcement:   Gateway: the gateways ask the check 0 times a second (NoChecks)\n"},
	} {
		var out bytes.Buffer
		if err := writeStatus(&out, c.wq); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: status without %q:\n%s", c.name, c.want, out.String())
		}
	}
}

// TestStatusSaysHowOldTheFiguresAre: the queue's line ends with the age of its figures.
func TestStatusSaysHowOldTheFiguresAre(t *testing.T) {
	wq := builder.Queue("shop", "orders").Obj()
	wq.Status.QueueDepth, wq.Status.ActiveVisitors = 120, 40
	read := metav1.NewTime(time.Now().Add(-12 * time.Second))
	wq.Status.LiveFiguresTime = &read
	var out bytes.Buffer
	if err := writeStatus(&out, wq); err != nil {
		t.Fatal(err)
	}
	if want := "Queue:         120 waiting; 40 holding a pass (since 12s ago)\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("status without %q:\n%s", want, out.String())
	}
}

// TestStatusSaysWhatTheLastBusySpellDid: after a herd the 10 s rates fall to 0; the last busy spell
// says what the room admitted under it, and whether it is over.
func TestStatusSaysWhatTheLastBusySpellDid(t *testing.T) {
	wq := builder.Queue("shop", "orders").Obj()
	end := time.Now().Add(-20 * time.Second).Truncate(time.Second)
	wq.Status.LastBusy = &herdgatev1alpha1.BusySpellStatus{Start: metav1.NewTime(end.Add(-4 * time.Second)), End: metav1.NewTime(end),
		Admitted: 560, AdmittedPerSecond: "140", PeakDepth: 548}
	for ongoing, want := range map[bool]string{
		false: "Last busy:     560 admitted at 140 a second over 4s (ended 20s ago), up to 548 waiting\n",
		true:  "Last busy:     560 admitted at 140 a second over 4s (under way), up to 548 waiting\n",
	} {
		wq.Status.LastBusy.Ongoing = ongoing
		var out bytes.Buffer
		if err := writeStatus(&out, wq); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("status without %q:\n%s", want, out.String())
		}
	}
}

// TestStatusNamesTheRoomID: the room ID, which suffixes its cookies and names it on a shared host.
func TestStatusNamesTheRoomID(t *testing.T) {
	wq := builder.Queue("shop", "orders").Obj()
	var out bytes.Buffer
	if err := writeStatus(&out, wq); err != nil {
		t.Fatal(err)
	}
	id := herdgatev1alpha1.RoomID("shop", "orders")
	if want := "Room ID:       " + id + " (its cookies end in _" + id; !strings.Contains(out.String(), want) {
		t.Fatalf("status without %q:\n%s", want, out.String())
	}
}

// TestStatusSaysHowFarOffTheWaitEstimatesWere: a room whose proxies judged the waits they told
// shows the recent 90th percentile of the error; one that judged none says nothing of it.
func TestStatusSaysHowFarOffTheWaitEstimatesWere(t *testing.T) {
	wq := builder.Queue("shop", "orders").Obj()
	wq.Status.Workload = &herdgatev1alpha1.WorkloadStatus{WaitEstimatesJudged: 1200, WaitEstimateErrorP90Percent: "15"}
	var out bytes.Buffer
	if err := writeStatus(&out, wq); err != nil {
		t.Fatal(err)
	}
	if want := "waits told off by at most 15 % for 9 in 10 of the 1200 visitors admitted over the last 5 minutes"; !strings.Contains(out.String(), want) {
		t.Fatalf("status without %q:\n%s", want, out.String())
	}
	wq.Status.Workload = &herdgatev1alpha1.WorkloadStatus{}
	out.Reset()
	if err := writeStatus(&out, wq); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Estimates") {
		t.Fatalf("status of a room that judged no estimate speaks of them:\n%s", out.String())
	}
}
