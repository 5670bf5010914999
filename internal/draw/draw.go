// Package draw is the fair, verifiable draw of a pre-queue's order at opening. Each visitor who took a
// pre-queue place holds an arrival number; its place is the rank of HMAC-SHA256(seed, arrival) among
// everyone's. The seed is random, kept secret until opening and committed to beforehand by its
// SHA-256, so nobody, the operator included, can choose the order, arriving early wins nothing, and
// anyone given the seed and the arrivals can recompute every place.
package draw

import (
	"bufio"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SeedBytes is the length of a seed.
const SeedBytes = 32

// NewSeed draws a random seed.
func NewSeed() ([]byte, error) {
	seed := make([]byte, SeedBytes)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	return seed, nil
}

// Commitment is the hex SHA-256 of the seed, published before the pre-queue opens.
func Commitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// Key is the draw key of an arrival: the first 8 bytes of HMAC-SHA256(seed, the arrival as decimal
// digits), big-endian. Places go to keys in ascending order.
func Key(seed []byte, arrival int64) uint64 {
	mac := hmac.New(sha256.New, seed)
	mac.Write(strconv.AppendInt(nil, arrival, 10))
	return binary.BigEndian.Uint64(mac.Sum(nil))
}

// Order sorts arrival numbers into the drawn order, in place: by key, equal keys (never seen in
// practice) by arrival.
func Order(seed []byte, arrivals []int64) {
	type keyed struct {
		key     uint64
		arrival int64
	}
	ks := make([]keyed, len(arrivals))
	mac := hmac.New(sha256.New, seed)
	var digits [20]byte
	var sum [sha256.Size]byte
	for i, a := range arrivals {
		mac.Reset()
		mac.Write(strconv.AppendInt(digits[:0], a, 10))
		ks[i] = keyed{binary.BigEndian.Uint64(mac.Sum(sum[:0])), a}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.arrival, b.arrival)
	})
	for i, k := range ks {
		arrivals[i] = k.arrival
	}
}

// Result is one line of a draw's record: the place an arrival drew, 1 first.
type Result struct {
	Arrival, Place int64
}

// Verify recomputes the places of a recorded draw from its seed, checks the seed against the
// commitment when one is given, and returns the first disagreement. The places of a record are the
// ranks of its arrivals' keys: 1 to the number of lines, each once.
func Verify(seed []byte, commitment string, record []Result) error {
	if commitment != "" && Commitment(seed) != commitment {
		return fmt.Errorf("the seed hashes to %s, not to the commitment %s", Commitment(seed), commitment)
	}
	arrivals := make([]int64, len(record))
	for i, r := range record {
		arrivals[i] = r.Arrival
	}
	Order(seed, arrivals)
	want := make(map[int64]int64, len(arrivals))
	for i, a := range arrivals {
		if _, twice := want[a]; twice {
			return fmt.Errorf("arrival %d is in the record twice", a)
		}
		want[a] = int64(i + 1)
	}
	for _, r := range record {
		if want[r.Arrival] != r.Place {
			return fmt.Errorf("arrival %d drew place %d, the seed gives it place %d", r.Arrival, r.Place, want[r.Arrival])
		}
	}
	return nil
}

// ParseSeed reads a seed given in hex, as status.seed shows it.
func ParseSeed(s string) ([]byte, error) {
	seed, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("the seed is not hex: %w", err)
	}
	if len(seed) != SeedBytes {
		return nil, fmt.Errorf("the seed is %d bytes, not %d", len(seed), SeedBytes)
	}
	return seed, nil
}

// WriteRecord writes a record as its lines, "arrival place".
func WriteRecord(w io.Writer, record []Result) error {
	bw := bufio.NewWriter(w)
	for _, r := range record {
		if _, err := fmt.Fprintf(bw, "%d %d\n", r.Arrival, r.Place); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ParseRecord reads a record's lines, "arrival place"; blank lines and lines starting with # are
// skipped. An error names the line.
func ParseRecord(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		a, p, ok := strings.Cut(text, " ")
		arrival, err1 := strconv.ParseInt(a, 10, 64)
		place, err2 := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if !ok || err1 != nil || err2 != nil || arrival <= 0 || place <= 0 {
			return nil, fmt.Errorf("line %d: %q is not \"arrival place\"", line, text)
		}
		out = append(out, Result{Arrival: arrival, Place: place})
	}
	return out, sc.Err()
}

// Spearman is the rank correlation of x and y (equal lengths, two at least; ties take their mean
// rank): near 0 when one tells nothing of the other's order.
func Spearman(x, y []float64) float64 {
	rx, ry := ranks(x), ranks(y)
	n := float64(len(x))
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
	out := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			out[idx[k]] = mean
		}
		i = j + 1
	}
	return out
}
