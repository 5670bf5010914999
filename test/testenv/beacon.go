package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drand/drand/v2/common"
	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"
	"github.com/drand/kyber"
	"github.com/drand/kyber/util/random"
)

// Beacon is a randomness beacon on a loopback port that serves a chain of its own in drand's HTTP
// API: a group of one, whose BLS key signs each round once its time has come. Tests make it late,
// make it sign with another key, or take it down.
type Beacon struct {
	URL string
	// Hash is the chain hash, hex; Period and Genesis say when rounds come.
	Hash    string
	Period  time.Duration
	Genesis time.Time

	scheme *crypto.Scheme
	info   *chain.Info
	key    kyber.Scalar
	server *httptest.Server

	mu sync.Mutex
	// now is the beacon's clock; heldFrom withholds rounds from that number on; forger, when set,
	// signs in place of the chain's key; down answers 503 to everything; asked counts round requests.
	now      func() time.Time
	heldFrom uint64
	forger   kyber.Scalar
	down     bool
	asked    int
	chained  map[uint64][]byte
}

// BeaconOptions shape a test beacon: its scheme (default bls-unchained-g1-rfc9380, drand's
// quicknet's), its period (default 1s) and when its genesis was (default a minute ago).
type BeaconOptions struct {
	Scheme  string
	Period  time.Duration
	Genesis time.Time
	Now     func() time.Time
}

// StartBeacon serves a fresh chain until the test ends.
func StartBeacon(t TB, opts BeaconOptions) *Beacon {
	t.Helper()
	if opts.Scheme == "" {
		opts.Scheme = crypto.SigsOnG1ID
	}
	if opts.Period == 0 {
		opts.Period = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Genesis.IsZero() {
		opts.Genesis = opts.Now().Add(-time.Minute).Truncate(time.Second)
	}
	scheme, err := crypto.SchemeFromName(opts.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	b := &Beacon{Period: opts.Period, Genesis: opts.Genesis, scheme: scheme, now: opts.Now, chained: map[uint64][]byte{}}
	b.key = scheme.KeyGroup.Scalar().Pick(random.New())
	seed := sha256.Sum256([]byte("herdgate test beacon " + opts.Genesis.String()))
	b.info = &chain.Info{PublicKey: scheme.KeyGroup.Point().Mul(b.key, nil), Period: opts.Period, Scheme: scheme.Name,
		GenesisTime: opts.Genesis.Unix(), GenesisSeed: seed[:], ID: "herdgate-test"}
	b.Hash = b.info.HashString()
	b.chained[0] = seed[:]
	b.server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.server.Close)
	b.URL = b.server.URL
	return b
}

// Withhold makes the beacon late: from round n on it answers as if it had not published them yet
// (0 publishes every round on time again).
func (b *Beacon) Withhold(n uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.heldFrom = n
}

// Forge makes the beacon sign its rounds with a key of its own, not the chain's: what a mirror
// that lies serves.
func (b *Beacon) Forge() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forger = b.scheme.KeyGroup.Scalar().Pick(random.New())
}

// Down makes the beacon answer 503 to everything (false brings it back).
func (b *Beacon) Down(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}

// Asked is how many rounds were asked of the beacon.
func (b *Beacon) Asked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked
}

// PublicKey is the chain's public key, hex.
func (b *Beacon) PublicKey() string {
	raw, _ := b.info.PublicKey.MarshalBinary()
	return hex.EncodeToString(raw)
}

// RoundAt is the round the beacon publishes at t: the last whose time has come.
func (b *Beacon) RoundAt(t time.Time) uint64 {
	return common.CurrentRound(t.Unix(), b.Period, b.Genesis.Unix())
}

// Sign is round n as the chain's key signs it: its signature and, for a chained scheme, the
// previous round's.
func (b *Beacon) Sign(n uint64) (signature, previous []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sign(b.key, n)
}

func (b *Beacon) sign(key kyber.Scalar, n uint64) (signature, previous []byte) {
	chained := b.scheme.Name == crypto.DefaultSchemeID
	if chained {
		// Each round signs the one before: sign up from the last known.
		last := n - 1
		for b.chained[last] == nil {
			last--
		}
		for r := last + 1; r < n; r++ {
			b.chained[r] = b.signOne(b.key, r, b.chained[r-1])
		}
		previous = b.chained[n-1]
	}
	return b.signOne(key, n, previous), previous
}

func (b *Beacon) signOne(key kyber.Scalar, n uint64, previous []byte) []byte {
	sig, err := b.scheme.AuthScheme.Sign(key, b.scheme.DigestBeacon(&common.Beacon{Round: n, PreviousSig: previous}))
	if err != nil {
		panic(fmt.Sprintf("signing round %d: %v", n, err))
	}
	return sig
}

func (b *Beacon) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	hash, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case b.down:
		http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
	case hash != b.Hash:
		http.Error(w, `{"error":"unknown chain"}`, http.StatusNotFound)
	case rest == "info":
		_ = json.NewEncoder(w).Encode(b.info)
	case strings.HasPrefix(rest, "public/"):
		b.asked++
		n, err := strconv.ParseUint(strings.TrimPrefix(rest, "public/"), 10, 64)
		if err != nil || n == 0 {
			http.Error(w, `{"error":"bad round"}`, http.StatusBadRequest)
			return
		}
		if n > b.RoundAt(b.now()) || (b.heldFrom > 0 && n >= b.heldFrom) {
			http.Error(w, `{"error":"not yet"}`, http.StatusTooEarly)
			return
		}
		key := b.key
		if b.forger != nil {
			key = b.forger
		}
		sig, prev := b.sign(key, n)
		randomness := sha256.Sum256(sig)
		answer := map[string]any{"round": n, "randomness": hex.EncodeToString(randomness[:]), "signature": hex.EncodeToString(sig)}
		if prev != nil {
			answer["previous_signature"] = hex.EncodeToString(prev)
		}
		_ = json.NewEncoder(w).Encode(answer)
	default:
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
	}
}
