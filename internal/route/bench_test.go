package route

import "testing"

// BenchmarkNormalize measures route matching's input step on a clean and on a tricky path.
func BenchmarkNormalize(b *testing.B) {
	for _, p := range []string{"/api/v1/orders", "/api//v1/./x/../orders;jsessionid=1"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Normalize(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
