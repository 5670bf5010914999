package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

func TestLiveFiguresAreWrittenAtMostEveryInterval(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	r := &WaitingQueueReconciler{Now: func() time.Time { return now }}
	written := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{UID: "uid-busy"}}
	written.Status.QueueDepth = 500
	written.Status.Conditions = []metav1.Condition{{Type: herdgatev1alpha1.ConditionAdmitting, Status: metav1.ConditionTrue, Reason: "SchedulerRunning", Message: "500 waiting"}}
	next := func(change func(*herdgatev1alpha1.WaitingQueue)) *herdgatev1alpha1.WaitingQueue {
		wq := written.DeepCopy()
		change(wq)
		return wq
	}
	deeper := func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Status.QueueDepth = 480
		wq.Status.AdmittedPerSecond = "140"
		wq.Status.Conditions[0].Message = "480 waiting"
	}

	if wq := next(deeper); r.holdLiveStatus(written, wq) != 0 || wq.Status.QueueDepth != 480 {
		t.Fatal("the first write of a queue was held")
	}
	r.liveWritten.Store(written.UID, now)

	now = now.Add(3 * time.Second)
	wq := next(deeper)
	if due := r.holdLiveStatus(written, wq); due != liveStatusInterval-3*time.Second || wq.Status.QueueDepth != 500 || wq.Status.Conditions[0].Message != "500 waiting" {
		t.Fatalf("live figures 3 s after a write: due in %s, depth %d; want them held %s more", due, wq.Status.QueueDepth, liveStatusInterval-3*time.Second)
	}
	for name, change := range map[string]func(*herdgatev1alpha1.WaitingQueue){
		"a condition's reason": func(wq *herdgatev1alpha1.WaitingQueue) { deeper(wq); wq.Status.Conditions[0].Reason = "Suspended" },
		"a condition's status": func(wq *herdgatev1alpha1.WaitingQueue) {
			deeper(wq)
			wq.Status.Conditions[0].Status = metav1.ConditionFalse
		},
		"the observed generation":   func(wq *herdgatev1alpha1.WaitingQueue) { deeper(wq); wq.Status.ObservedGeneration = 2 },
		"the plan":                  func(wq *herdgatev1alpha1.WaitingQueue) { wq.Status.Plan = &herdgatev1alpha1.PlanStatus{BatchSize: 7} },
		"a room that drained":       func(wq *herdgatev1alpha1.WaitingQueue) { wq.Status.QueueDepth = 0 },
		"the first pass held":       func(wq *herdgatev1alpha1.WaitingQueue) { deeper(wq); wq.Status.ActiveVisitors = 3 },
		"the first pre-queue place": func(wq *herdgatev1alpha1.WaitingQueue) { wq.Status.PreQueueDepth = 1 },
	} {
		if wq := next(change); r.holdLiveStatus(written, wq) != 0 || wq.Status.QueueDepth != next(change).Status.QueueDepth {
			t.Errorf("a change of %s was held", name)
		}
	}

	now = now.Add(liveStatusInterval)
	if wq := next(deeper); r.holdLiveStatus(written, wq) != 0 || wq.Status.QueueDepth != 480 {
		t.Fatal("live figures due were held")
	}
}

// TestLiveFiguresTimeMovesOnlyWithAFigure: a read that finds the figures as written keeps the time
// written with them, whatever else changes; a figure that changes brings its read's time.
func TestLiveFiguresTimeMovesOnlyWithAFigure(t *testing.T) {
	written := &herdgatev1alpha1.WaitingQueue{}
	written.Status.QueueDepth, written.Status.AdmittedPerSecond = 0, "0"
	written.Status.LiveFiguresTime = &metav1.Time{Time: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	readAt := metav1.NewTime(written.Status.LiveFiguresTime.Add(10 * time.Minute))
	for _, tc := range []struct {
		name   string
		change func(*herdgatev1alpha1.WaitingQueueStatus)
		moves  bool
	}{
		{"nothing", func(*herdgatev1alpha1.WaitingQueueStatus) {}, false},
		{"a condition", func(st *herdgatev1alpha1.WaitingQueueStatus) { st.ObservedGeneration = 2 }, false},
		{"the depth", func(st *herdgatev1alpha1.WaitingQueueStatus) { st.QueueDepth = 3 }, true},
		{"the admission rate", func(st *herdgatev1alpha1.WaitingQueueStatus) { st.AdmittedPerSecond = "1.4" }, true},
		{"a lane", func(st *herdgatev1alpha1.WaitingQueueStatus) {
			st.Lanes = []herdgatev1alpha1.LaneStatus{{Name: "main", Depth: 1}}
		}, true},
		{"the gateway checks", func(st *herdgatev1alpha1.WaitingQueueStatus) { st.GatewayChecksPerSecond = "2" }, true},
	} {
		wq := written.DeepCopy()
		tc.change(&wq.Status)
		wq.Status.LiveFiguresTime = readAt.DeepCopy()
		dateLiveFigures(written, wq)
		if moved := wq.Status.LiveFiguresTime.Equal(&readAt); moved != tc.moves {
			t.Errorf("a read that changed %s: liveFiguresTime %s, moved %t; want moved %t", tc.name, wq.Status.LiveFiguresTime, moved, tc.moves)
		}
	}
}
