package controllers

import (
	"testing"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestPassKeySlotsFollowRotation runs a queue's pass keys through 40 days of a weekly rotation, a
// reconcile an hour, as the Secret's data: the slots a gateway reads always hold the signing key, the
// key before it while its passes live, and the next key before its turn.
func TestPassKeySlotsFollowRotation(t *testing.T) {
	s := builder.Queue("shop", "orders").JWTPasses(herdgatev1alpha1.PassAlgorithmES256, 0).Settings()
	data := map[string][]byte{}
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var lastSigning string
	rotations := 0
	for now := start; now.Before(start.Add(40 * 24 * time.Hour)); now = now.Add(time.Hour) {
		keys, err := rotatePassKeys(data, s, now)
		if err != nil {
			t.Fatal(err)
		}
		slots := passKeySlots(keys, now)
		cur := keys.Signing(now)
		if slots[PassKeysCurrent].ID != cur.ID {
			t.Fatalf("at %s the current slot holds %s, not the signing key %s", now, slots[PassKeysCurrent].ID, cur.ID)
		}
		if !slots[PassKeysNext].ActiveFrom.After(now) {
			t.Fatalf("at %s the next slot holds no key ahead of its turn", now)
		}
		if cur.ID != lastSigning {
			if lastSigning != "" {
				rotations++
				if slots[PassKeysPrevious].ID != lastSigning {
					t.Fatalf("at %s the key that signed until now is not in the previous slot", now)
				}
			}
			lastSigning = cur.ID
		}
	}
	if rotations != 5 {
		t.Errorf("%d rotations in 40 days of weekly rotation, want 5", rotations)
	}
	if keys, _ := rotatePassKeys(data, builder.Queue("shop", "orders").Settings(), start); keys != nil {
		t.Error("a queue of HMAC passes has pass keys")
	}
}
