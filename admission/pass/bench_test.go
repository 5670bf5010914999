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
