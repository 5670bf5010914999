package draw

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

func TestOrderIsAVerifiablePermutation(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	// Arrival numbers of a pre-queue have gaps where visitors went elsewhere.
	arrivals := make([]int64, 0, 2000)
	for i := int64(1); len(arrivals) < 2000; i++ {
		if i%7 != 3 {
			arrivals = append(arrivals, i*3)
		}
	}
	byArrival := make([]float64, len(arrivals))
	for i, a := range arrivals {
		byArrival[i] = float64(a)
	}
	Order(seed, arrivals)
	record := make([]Result, len(arrivals))
	seen := map[int64]bool{}
	for i, a := range arrivals {
		record[i] = Result{Arrival: a, Place: int64(i + 1)}
		seen[a] = true
		if i > 0 && Key(seed, arrivals[i-1]) > Key(seed, a) {
			t.Fatalf("places %d and %d are out of key order", i, i+1)
		}
	}
	if len(seen) != 2000 {
		t.Fatalf("the order holds %d distinct arrivals of 2000", len(seen))
	}
	if err := Verify(seed, Commitment(seed), record); err != nil {
		t.Fatal(err)
	}
	// Arriving early wins nothing: arrival and place are uncorrelated.
	xs, ys := make([]float64, len(record)), make([]float64, len(record))
	for i, r := range record {
		xs[i], ys[i] = float64(r.Arrival), float64(r.Place)
	}
	if rho := Spearman(xs, ys); math.Abs(rho) > 0.1 {
		t.Fatalf("Spearman's rho between arrival and place = %.3f", rho)
	}
	if rho := Spearman(xs, xs); math.Abs(rho-1) > 1e-12 {
		t.Fatalf("Spearman's rho of an order with itself = %v", rho)
	}
	// The record survives its text form.
	var buf bytes.Buffer
	if err := WriteRecord(&buf, record); err != nil {
		t.Fatal(err)
	}
	back, err := ParseRecord(strings.NewReader("# a draw\n\n" + buf.String()))
	if err != nil || len(back) != len(record) || back[17] != record[17] {
		t.Fatalf("the record read back as %d lines (%v)", len(back), err)
	}
	// Another seed, another order; a tampered record or a wrong seed fails.
	if err := Verify([]byte("another seed, another order......"), "", record); err == nil {
		t.Fatal("a record verified under another seed")
	}
	record[0].Place, record[1].Place = record[1].Place, record[0].Place
	if err := Verify(seed, "", record); err == nil {
		t.Fatal("a tampered record verified")
	}
	if err := Verify(seed, Commitment([]byte("other")), record); err == nil {
		t.Fatal("a seed verified against another commitment")
	}
	if err := Verify(seed, "", append(record[:2:2], record[0])); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a record with an arrival twice: %v", err)
	}
}

func TestParseRecordAndSeedNameTheirFault(t *testing.T) {
	if _, err := ParseRecord(strings.NewReader("1 1\n2 x\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad line: %v", err)
	}
	if _, err := ParseSeed("abcd"); err == nil || !strings.Contains(err.Error(), "2 bytes") {
		t.Fatalf("a short seed: %v", err)
	}
	if _, err := ParseSeed("zz"); err == nil || !strings.Contains(err.Error(), "hex") {
		t.Fatalf("a seed not in hex: %v", err)
	}
	seed, _ := NewSeed()
	if got, err := ParseSeed(strings.ToUpper(hex.EncodeToString(seed))); err != nil || !bytes.Equal(got, seed) {
		t.Fatalf("a seed read back as %x (%v)", got, err)
	}
}

func BenchmarkOrderMillion(b *testing.B) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	arrivals := make([]int64, 1_000_000)
	for b.Loop() {
		for i := range arrivals {
			arrivals[i] = int64(i + 1)
		}
		Order(seed, arrivals)
	}
}
