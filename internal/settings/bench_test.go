package settings_test

import (
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// BenchmarkDerive weighs the schema check (the CRD's OpenAPI schema and CEL rules, run as the API
// server runs them) against the whole derivation it is part of, on the reference queue with a
// schedule; docs/performance.md has the figures.
func BenchmarkDerive(b *testing.B) {
	opens := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	wq := reference()
	wq.Spec.Schedule = builder.Queue("", "").Schedule(opens.Add(-15*time.Minute), opens, opens.Add(8*time.Hour)).Obj().Spec.Schedule
	b.Run("schema check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := settings.CheckSchema(wq); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("derive, schema check included", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := settings.Derive(wq); err != nil {
				b.Fatal(err)
			}
		}
	})
}
