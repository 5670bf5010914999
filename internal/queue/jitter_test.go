package queue

import (
	"slices"
	"testing"
	"time"
)

func TestJitterOffsets(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		window time.Duration
	}{
		{"the reference tick", 14, 100 * time.Millisecond},
		{"one visitor", 1, 100 * time.Millisecond},
		{"more visitors than milliseconds", MaxAdmitPerTick, 100 * time.Millisecond},
		{"a window that does not divide", 7, 10 * time.Millisecond},
		{"jitter off", 5, 0},
		{"nobody", 0, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, seed := range []int64{0, 1, 7, -3, 1 << 40, jitterModulus - 1} {
				got := JitterOffsets(seed, tc.n, tc.window)
				if len(got) != tc.n {
					t.Fatalf("seed %d: %d offsets for %d visitors", seed, len(got), tc.n)
				}
				if !slices.IsSorted(got) {
					t.Fatalf("seed %d: offsets not earliest first: %v", seed, got)
				}
				w := tc.window.Milliseconds()
				for i, o := range got {
					lo := time.Duration(int64(i)*w/int64(tc.n)) * time.Millisecond
					hi := time.Duration(int64(i+1)*w/int64(tc.n)) * time.Millisecond
					if o < lo || (o >= hi && hi > lo) || (hi == lo && o != lo) {
						t.Fatalf("seed %d: offset %d = %s outside its slot [%s, %s)", seed, i, o, lo, hi)
					}
				}
				if again := JitterOffsets(seed, tc.n, tc.window); !slices.Equal(got, again) {
					t.Fatalf("seed %d: two calls differ", seed)
				}
			}
		})
	}
	// Different seeds draw different points of the slots.
	if slices.Equal(JitterOffsets(1, 14, 100*time.Millisecond), JitterOffsets(2, 14, 100*time.Millisecond)) {
		t.Fatal("seeds 1 and 2 give the same offsets")
	}
}

func TestJitterOffsetsAreUniformWithinSlots(t *testing.T) {
	// Over many seeds, the first of 5 visitors in a 100 ms window falls evenly over [0, 20 ms).
	var counts [20]int
	for seed := range int64(20000) {
		counts[JitterOffsets(seed, 5, 100*time.Millisecond)[0]/time.Millisecond]++
	}
	for ms, c := range counts {
		if c < 800 || c > 1200 {
			t.Fatalf("offset %d ms drawn %d times of 20000, want about 1000: %v", ms, c, counts)
		}
	}
}
