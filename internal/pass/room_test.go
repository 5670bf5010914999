package pass

import (
	"bytes"
	"testing"
	"time"
)

// TestRoomPasses: a room's passes are its signer's HMAC passes, or JWTs signed with its key set; a
// room outside Kubernetes is told apart by its name, and each room refuses another's passes.
func TestRoomPasses(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	key := bytes.Repeat([]byte{7}, 32)
	ks := newKeySet(t, ES256, now)
	raw, err := ks.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return now }
	rooms := map[string]Room{
		"hmac":            {UID: "uid-1", Namespace: "shop", Name: "orders", HMACKey: key},
		"hmac other uid":  {UID: "uid-2", Namespace: "shop", Name: "orders", HMACKey: key},
		"file":            {Namespace: "shop", Name: "orders", HMACKey: key},
		"file other name": {Namespace: "shop", Name: "tickets", HMACKey: key},
		"jwt":             {UID: "uid-1", Namespace: "shop", Name: "orders", HMACKey: key, JWT: true, JWTKeys: raw, Now: clock},
		"jwt other room":  {UID: "uid-1", Namespace: "shop", Name: "tickets", HMACKey: key, JWT: true, JWTKeys: raw, Now: clock},
	}
	tokens := map[string]string{}
	for name, r := range rooms {
		_, passes, err := r.Passes()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, isJWT := passes.(*JWTPasses); isJWT != r.JWT {
			t.Errorf("%s: JWT passes %t, want %t", name, isJWT, r.JWT)
		}
		tokens[name] = passes.Issue("ada", now, now.Add(time.Minute))
	}
	for name, r := range rooms {
		_, passes, _ := r.Passes()
		for issuer, token := range tokens {
			_, result := passes.Verify(token, "ada", now.Add(time.Second))
			if want := issuer == name; (result == Valid) != want {
				t.Errorf("room %q verifies a pass of room %q: %s", name, issuer, result)
			}
		}
	}
	if _, _, err := (Room{Namespace: "shop", Name: "orders", HMACKey: key, JWT: true, JWTKeys: []byte("{")}).Passes(); err == nil {
		t.Error("a malformed key set makes passes")
	}
	if _, _, err := (Room{Namespace: "shop", Name: "orders", HMACKey: key[:31]}).Passes(); err == nil {
		t.Error("a 31-byte HMAC key makes passes")
	}
}
