package pass

import (
	"testing"
	"time"
)

// BenchmarkVerifyPass is the cost the protected path pays per request: no Redis, no network.
func BenchmarkVerifyPass(b *testing.B) {
	signer, err := NewSigner("2f0c8a4e-6a61-4d0e-9a39-9d8f1f0c3b11", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	visitor := "Zm9vYmFyYmF6cXV4cXV1dQ" // a 22-character anonymous ID
	now := time.Now()
	token := signer.Issue(visitor, now.Add(-time.Second), now.Add(time.Minute))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, r := signer.Verify(token, visitor, now); r != Valid {
				b.Fatal(r)
			}
		}
	})
}

// BenchmarkVerifyJWTPass is the same cost for a JWT pass a replica has seen before: its signature is
// verified once, then a hash and a lookup. BenchmarkVerifyJWTSignature is that first time.
func BenchmarkVerifyJWTPass(b *testing.B) {
	for _, alg := range []Algorithm{ES256, HS256} {
		b.Run(string(alg), func(b *testing.B) {
			j, token, visitor, now := benchJWT(b, alg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, r := j.Verify(token, visitor, now); r != Valid {
						b.Fatal(r)
					}
				}
			})
		})
	}
}

func BenchmarkVerifyJWTSignature(b *testing.B) {
	for _, alg := range []Algorithm{ES256, HS256} {
		b.Run(string(alg), func(b *testing.B) {
			j, token, _, _ := benchJWT(b, alg)
			b.ReportAllocs()
			for b.Loop() {
				if _, r := j.verifySignature(token); r != Valid {
					b.Fatal(r)
				}
			}
		})
	}
}

func benchJWT(b *testing.B, alg Algorithm) (*JWTPasses, string, string, time.Time) {
	now := time.Now()
	ks := &KeySet{}
	if _, err := ks.Rotate(now, Rotation{Algorithm: alg, Every: time.Hour, Keep: time.Hour}); err != nil {
		b.Fatal(err)
	}
	j, err := NewJWTPasses("shop/orders", ks, func() time.Time { return now })
	if err != nil {
		b.Fatal(err)
	}
	visitor := "Zm9vYmFyYmF6cXV4cXV1dQ"
	return j, j.Issue(visitor, now.Add(-time.Second), now.Add(time.Minute)), visitor, now
}
