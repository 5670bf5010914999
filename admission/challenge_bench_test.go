package admission_test

import (
	"fmt"
	"testing"

	"github.com/herdgate/herdgate/admission/entry"
)

// BenchmarkSolve times Solve, what an API client runs, at each difficulty; beside it
// test/e2e's BenchmarkSolveInTheBrowser times the waiting page's solver (make bench-pow).
func BenchmarkSolve(b *testing.B) {
	for _, d := range []int{8, 12, 14, 16, 18} {
		b.Run(fmt.Sprintf("difficulty=%d", d), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				challenge := fmt.Sprintf("bench-%d-%d", d, i)
				if nonce := entry.Solve(challenge, d); entry.LeadingZeroBits(challenge, nonce) < d {
					b.Fatal("not solved")
				}
			}
		})
	}
}
