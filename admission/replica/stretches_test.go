package replica

import (
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
)

// TestStretchesAreTheBudgetsRoundedUp: a stretch is the budget's for the depth rounded up to two
// significant digits, remembered; without a budget or a queue it is the longest interval.
func TestStretchesAreTheBudgetsRoundedUp(t *testing.T) {
	plan, err := capacity.FromQuota(1, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	b := capacity.PollBudget{PerSecond: 50, MinInterval: 500 * time.Millisecond, MaxInterval: 5 * time.Second, AbandonAfter: 5 * time.Minute}
	var s PollStretches
	want, _ := b.Stretch(plan, 2100)
	if got := s.Stretch(b, plan, 2002); got != want {
		t.Fatalf("2,002 deep: %s, want the budget's for 2,100: %s", got, want)
	}
	if got := s.Stretch(b, plan, 2050); got != want || len(s.seen) != 1 {
		t.Fatalf("2,050 deep: %s with %d remembered, want %s from the one remembered", got, len(s.seen), want)
	}
	if got := s.Stretch(capacity.PollBudget{MaxInterval: 5 * time.Second}, plan, 2002); got != 5*time.Second {
		t.Fatalf("without a budget: %s", got)
	}
	if got := s.Stretch(b, plan, 0); got != b.MaxInterval {
		t.Fatalf("an empty queue: %s", got)
	}
	for n, want := range map[int64]int64{1: 1, 99: 99, 100: 100, 101: 110, 1234: 1300, 99_999: 100_000} {
		if got := roundUp2(n); got != want {
			t.Errorf("roundUp2(%d) = %d, want %d", n, got, want)
		}
	}
}
