// Package beacon reads a public randomness beacon in the drand format, which a pre-queue's draw may
// take its seed from (spec.draw.seedSource Beacon): the chain's description, whose hash the spec
// names, and its rounds, each a BLS signature that anyone can check with the chain's public key. The
// draw commits to a round that comes after the pre-queue freezes, so that nobody, holding the room's
// secret or not, can know the order before the freeze (docs/guides/launch.md, "The beacon").
package beacon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drand/drand/v2/common"
	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"
)

// Chain is a beacon's chain as its info describes it: what checks a round, and when each comes.
type Chain struct {
	// Hash is the chain hash, hex: SHA-256 over the period, the genesis time, the public key, the
	// genesis seed and the beacon id, which names the chain whatever server serves it.
	Hash string
	// PublicKey is the group's public key, hex; Scheme the signature scheme's name.
	PublicKey, Scheme string
	// Period is the time between rounds; GenesisTime is when round 1 came, in Unix seconds.
	Period      time.Duration
	GenesisTime int64
	// GenesisSeed, hex, and BeaconID enter the chain hash.
	GenesisSeed, BeaconID string
}

// Round is one round of a chain: its number and signature, the previous round's signature for a
// chained scheme, and its randomness, SHA-256 of the signature.
type Round struct {
	Number                                   uint64
	Randomness, Signature, PreviousSignature []byte
}

// ErrNotYet: the beacon has not published the round yet.
var ErrNotYet = errors.New("the beacon has not published the round yet")

// maxAnswer bounds what is read of a beacon's answer.
const maxAnswer = 64 << 10

// RoundAfter is the first round the chain publishes strictly after t: its randomness is unknown at t.
func (c Chain) RoundAfter(t time.Time) uint64 {
	next, _ := common.NextRound(t.Unix(), c.Period, c.GenesisTime)
	// NextRound counts from the second t falls in: a round due at that second, but before t, is
	// already out.
	if common.TimeOfRound(c.Period, c.GenesisTime, next) <= t.Unix() {
		next++
	}
	return next
}

// TimeOf is when the chain publishes round n.
func (c Chain) TimeOf(n uint64) time.Time {
	return time.Unix(common.TimeOfRound(c.Period, c.GenesisTime, n), 0)
}

// info is the chain as drand writes it in its info answer and in this package's records.
func (c Chain) info() (*chain.Info, error) {
	raw, err := json.Marshal(map[string]any{
		"public_key": c.PublicKey, "period": uint64(c.Period / time.Second), "genesis_time": c.GenesisTime,
		"genesis_seed": c.GenesisSeed, "scheme": c.Scheme, "beacon_id": c.BeaconID,
	})
	if err != nil {
		return nil, err
	}
	info := &chain.Info{}
	if err := json.Unmarshal(raw, info); err != nil {
		return nil, fmt.Errorf("the chain's description: %w", err)
	}
	return info, nil
}

// CheckHash recomputes the chain hash from the chain's description and compares it with c.Hash:
// what makes a public key served by a mirror, or kept in a status, the chain's own.
func (c Chain) CheckHash() error {
	info, err := c.info()
	if err != nil {
		return err
	}
	if got := info.HashString(); got != strings.ToLower(c.Hash) {
		return fmt.Errorf("the chain's description hashes to %s, not to the chain hash %s", got, c.Hash)
	}
	return nil
}

// Verify checks a round: its signature by the chain's public key over the round (and the previous
// signature, for a chained scheme), and its randomness, which must be the signature's SHA-256.
func (c Chain) Verify(r Round) error {
	info, err := c.info()
	if err != nil {
		return err
	}
	scheme, err := crypto.SchemeFromName(info.Scheme)
	if err != nil {
		return fmt.Errorf("the chain's scheme: %w", err)
	}
	b := &common.Beacon{Round: r.Number, Signature: r.Signature, PreviousSig: r.PreviousSignature}
	if err := scheme.VerifyBeacon(b, info.PublicKey); err != nil {
		return fmt.Errorf("round %d: the signature does not verify with the chain's public key: %w", r.Number, err)
	}
	if sum := sha256.Sum256(r.Signature); !hmac.Equal(sum[:], r.Randomness) {
		return fmt.Errorf("round %d: the randomness is not the SHA-256 of the signature", r.Number)
	}
	return nil
}

// Seed is the draw's seed from the room's committed secret and a verified round: HMAC-SHA256 keyed
// with the secret over "herdgate-draw-beacon-v1", the chain hash's 32 bytes, the round number as 8
// big-endian bytes and the round's randomness. The secret alone, known to whoever reads the room's
// Secret, says nothing of it before the round is out; the round alone says nothing without the
// secret, which hashes to the commitment published before the pre-queue opened.
func Seed(secret []byte, chainHash string, round uint64, randomness []byte) ([]byte, error) {
	hash, err := hex.DecodeString(chainHash)
	if err != nil || len(hash) != sha256.Size {
		return nil, fmt.Errorf("the chain hash %q is not 64 hex digits", chainHash)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("herdgate-draw-beacon-v1"))
	mac.Write(hash)
	mac.Write(binary.BigEndian.AppendUint64(nil, round))
	mac.Write(randomness)
	return mac.Sum(nil), nil
}

// Client reads a beacon's HTTP API at a base address: a drand relay, or a mirror of one.
type Client struct {
	// URL is the base address; the chain's paths go below it.
	URL string
	// HTTP makes the calls; nil means http.DefaultClient. Each call is bounded by its context.
	HTTP *http.Client
}

// FetchChain reads the chain's info at URL/<hash>/info and checks it hashes to hash: a mirror can
// serve the chain, never another one.
func (cl Client) FetchChain(ctx context.Context, hash string) (Chain, error) {
	var raw struct {
		PublicKey   string `json:"public_key"`
		Period      int64  `json:"period"`
		GenesisTime int64  `json:"genesis_time"`
		GenesisSeed string `json:"genesis_seed"`
		Scheme      string `json:"scheme"`
		BeaconID    string `json:"beacon_id"`
		// The names of drand's first API, which some relays still serve.
		SchemeID  string `json:"schemeID"`
		GroupHash string `json:"groupHash"`
		Metadata  *struct {
			BeaconID string `json:"beaconID"`
		} `json:"metadata"`
	}
	if err := cl.get(ctx, hash+"/info", &raw); errors.Is(err, ErrNotYet) {
		return Chain{}, fmt.Errorf("the beacon at %s serves no chain %s", cl.URL, hash)
	} else if err != nil {
		return Chain{}, err
	}
	c := Chain{Hash: strings.ToLower(hash), PublicKey: raw.PublicKey, Scheme: raw.Scheme, Period: time.Duration(raw.Period) * time.Second,
		GenesisTime: raw.GenesisTime, GenesisSeed: raw.GenesisSeed, BeaconID: raw.BeaconID}
	if c.Scheme == "" && raw.SchemeID != "" {
		c.Scheme, c.GenesisSeed = raw.SchemeID, raw.GroupHash
		if raw.Metadata != nil {
			c.BeaconID = raw.Metadata.BeaconID
		}
	}
	if c.Period <= 0 {
		return Chain{}, fmt.Errorf("the beacon's chain %s has a period of %ds", hash, raw.Period)
	}
	if err := c.CheckHash(); err != nil {
		return Chain{}, fmt.Errorf("the beacon at %s served another chain: %w", cl.URL, err)
	}
	return c, nil
}

// FetchRound reads round n of the chain at URL/<hash>/public/<n>. It returns ErrNotYet while the
// beacon has not published it; it does not verify it (Chain.Verify does).
func (cl Client) FetchRound(ctx context.Context, c Chain, n uint64) (Round, error) {
	var raw struct {
		Round             uint64 `json:"round"`
		Randomness        string `json:"randomness"`
		Signature         string `json:"signature"`
		PreviousSignature string `json:"previous_signature"`
	}
	if err := cl.get(ctx, c.Hash+"/public/"+strconv.FormatUint(n, 10), &raw); err != nil {
		return Round{}, err
	}
	if raw.Round != n {
		return Round{}, fmt.Errorf("asked for round %d, the beacon answered round %d", n, raw.Round)
	}
	r := Round{Number: n}
	var err1, err2, err3 error
	r.Randomness, err1 = hex.DecodeString(raw.Randomness)
	r.Signature, err2 = hex.DecodeString(raw.Signature)
	r.PreviousSignature, err3 = hex.DecodeString(raw.PreviousSignature)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Round{}, fmt.Errorf("round %d: %w", n, err)
	}
	return r, nil
}

func (cl Client) get(ctx context.Context, path string, into any) error {
	u, err := url.JoinPath(cl.URL, path)
	if err != nil {
		return fmt.Errorf("the beacon's address %q: %w", cl.URL, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	hc := cl.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("asking the beacon: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	switch {
	case err != nil:
		return fmt.Errorf("reading the beacon's answer to %s: %w", u, err)
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusTooEarly:
		return ErrNotYet
	case res.StatusCode != http.StatusOK:
		return fmt.Errorf("the beacon answered %s to %s", res.Status, u)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("the beacon's answer to %s: %w", u, err)
	}
	return nil
}
