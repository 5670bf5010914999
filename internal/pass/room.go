package pass

import "time"

// Room is what a room's passes are made from, wherever they are checked: the proxy that hands them
// out, the kubectl plugin that inspects one, a test.
type Room struct {
	// UID is the WaitingQueue's UID; "" outside Kubernetes, where the room's name keeps other rooms'
	// passes out.
	UID, Namespace, Name string
	// HMACKey signs visitor cookies and places, and the passes unless they are JWTs.
	HMACKey []byte
	// JWT makes the passes JWTs (spec.pass.format JWT), signed with the key set JWTKeys holds (the
	// room's Secret keeps it beside the HMAC key).
	JWT     bool
	JWTKeys []byte
	// Now tells which JWT key signs; nil means time.Now.
	Now func() time.Time
}

// Passes makes the room's signer and the passes it issues and verifies: the signer's own, or JWTs.
func (r Room) Passes() (*Signer, Passes, error) {
	uid := r.UID
	if uid == "" {
		uid = "file:" + r.Namespace + "/" + r.Name
	}
	signer, err := NewSigner(uid, r.HMACKey)
	if err != nil || !r.JWT {
		return signer, signer, err
	}
	keys, err := ParseKeySet(r.JWTKeys)
	if err != nil {
		return nil, nil, err
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	jwts, err := NewJWTPasses(r.Namespace+"/"+r.Name, keys, now)
	if err != nil {
		return nil, nil, err
	}
	return signer, jwts, nil
}
