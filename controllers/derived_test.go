package controllers

import (
	"testing"
	"time"

	"github.com/herdgate/herdgate/test/builder"
)

// TestSettingsAreDerivedOncePerGeneration: a resync of an unchanged queue reuses the settings derived
// from its generation, and a new generation, valid or not, is derived again.
func TestSettingsAreDerivedOncePerGeneration(t *testing.T) {
	r := &WaitingQueueReconciler{}
	wq := builder.Queue("shop", "drop").UID("uid-drop").Generation(1).Obj()
	first, err := r.derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.derive(wq.DeepCopy())
	if err != nil || again != first {
		t.Fatalf("a resync of generation 1 derived its settings again (%p, then %p, %v)", first, again, err)
	}

	wq = builder.Queue("shop", "drop").UID("uid-drop").Generation(2).Capacity(80, 200*time.Millisecond, 70).Obj()
	second, err := r.derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || second.Generation != 2 || second.Plan == first.Plan {
		t.Fatalf("generation 2 kept generation 1's settings: plan %v, then %v", first.Plan, second.Plan)
	}

	bad := builder.Queue("shop", "drop").UID("uid-drop").Generation(3).Capacity(0, 200*time.Millisecond, 70).Obj()
	if _, err := r.derive(bad); err == nil {
		t.Fatal("a pool of 0 was derived without an error")
	}
	if _, err := r.derive(bad.DeepCopy()); err == nil {
		t.Fatal("the refused generation 3 was accepted on its resync")
	}
	fixed := builder.Queue("shop", "drop").UID("uid-drop").Generation(4).Obj()
	if s, err := r.derive(fixed); err != nil || s.Generation != 4 {
		t.Fatalf("generation 4 fixes the spec, but derive gave %v, %v", s, err)
	}
}
