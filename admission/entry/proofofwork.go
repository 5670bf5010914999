package entry

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/settings"
)

const (
	// ProofOfWorkAlgorithm names the built-in proof of work: SHA-256 of challenge ":" nonce must
	// start with difficulty zero bits.
	ProofOfWorkAlgorithm = "sha256-leading-zero-bits"
	// ChallengeLifetime is how long a challenge may be solved and used.
	ChallengeLifetime = 2 * time.Minute
	// maxNonce bounds a nonce: letters and digits, at most this many.
	maxNonce = 32
	// challengeVersion starts every challenge this proxy issues.
	challengeVersion = "v1"
)

// ProofOfWork issues and checks the built-in challenge. A challenge is self-contained and signed, so
// any replica checks one another issued: "v1.", the base64url payload (expiry in Unix ms, the
// difficulty, 16 random bytes), ".", a MAC of the payload.
type ProofOfWork struct {
	settings.ProofOfWork
	key  []byte
	rate *entryRate
}

// NewProofOfWork is the proof of work of the room roomName (namespace/name), whose challenges are
// signed with a key derived from hmacKey.
func NewProofOfWork(s settings.ProofOfWork, hmacKey []byte, roomName string) *ProofOfWork {
	m := hmac.New(sha256.New, hmacKey)
	m.Write([]byte("herdgate proof-of-work key\x00" + roomName))
	return &ProofOfWork{ProofOfWork: s, key: m.Sum(nil), rate: &entryRate{}}
}

// Challenge is a proof-of-work challenge, the answer of GET /.herdgate/challenge.
type Challenge struct {
	Algorithm  string    `json:"algorithm"`
	Challenge  string    `json:"challenge"`
	Difficulty int       `json:"difficulty"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// difficultyAt is the difficulty of a challenge issued now: the spec's, plus one bit for each doubling
// of the entries a second above raiseAbove, up to maxDifficulty.
func (w *ProofOfWork) difficultyAt(now time.Time) int {
	d := w.Difficulty
	if w.RaiseAbove <= 0 {
		return d
	}
	rate := w.rate.perSecond(now)
	for threshold := float64(w.RaiseAbove); rate > threshold && d < w.MaxDifficulty; threshold *= 2 {
		d++
	}
	return d
}

// Issue is a fresh challenge, as hard as the entries of the last second make it.
func (w *ProofOfWork) Issue(now time.Time) Challenge {
	difficulty := w.difficultyAt(now)
	expires := now.Add(ChallengeLifetime).Truncate(time.Millisecond)
	payload := make([]byte, 8+1+16)
	binary.BigEndian.PutUint64(payload, uint64(expires.UnixMilli()))
	payload[8] = byte(difficulty)
	_, _ = rand.Read(payload[9:])
	c := challengeVersion + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(w.mac(payload))
	return Challenge{Algorithm: ProofOfWorkAlgorithm, Challenge: c, Difficulty: difficulty, ExpiresAt: expires.UTC()}
}

func (w *ProofOfWork) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, w.key)
	m.Write(payload)
	return m.Sum(nil)[:16]
}

// Check counts the entry toward the difficulty, then verifies its proof; the solution goes in out
// as a single-use token, for the engine to bind.
func (w *ProofOfWork) Check(in Input, out *Outcome) *Refusal {
	w.rate.add(in.Now)
	t, refused := w.verify(in.Request.Header(ProofHeader), in.Now)
	out.Limit.SingleUse = append(out.Limit.SingleUse, t...)
	return refused
}

// verify checks a proof, "challenge:nonce", at now; it returns the single-use token that keeps the
// solution from entering a second visitor, or why the entry is refused.
func (w *ProofOfWork) verify(proof string, now time.Time) ([]queue.SingleUse, *Refusal) {
	refuse := func(status int, code, message string) ([]queue.SingleUse, *Refusal) {
		return nil, &Refusal{Status: status, Code: code, Message: message, Header: ProofHeader, Link: ChallengePath}
	}
	if proof == "" {
		return refuse(http.StatusUnauthorized, "challenge_required", "solve the proof of work from "+ChallengePath+" and enter with it")
	}
	sep := strings.LastIndexByte(proof, ':')
	if sep < 0 || len(proof) > 256 {
		return refuse(http.StatusBadRequest, "challenge_invalid", "the proof is not challenge:nonce")
	}
	challenge, nonce := proof[:sep], proof[sep+1:]
	if nonce == "" || len(nonce) > maxNonce || strings.Trim(nonce, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return refuse(http.StatusBadRequest, "challenge_invalid", "the nonce must be 1 to 32 letters and digits")
	}
	parts := strings.Split(challenge, ".")
	if len(parts) != 3 || parts[0] != challengeVersion {
		return refuse(http.StatusForbidden, "challenge_invalid", "the challenge is not one this queue issued")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(parts[1])
	mac, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || len(payload) != 25 || !hmac.Equal(mac, w.mac(payload)) {
		return refuse(http.StatusForbidden, "challenge_invalid", "the challenge is not one this queue issued")
	}
	expires := time.UnixMilli(int64(binary.BigEndian.Uint64(payload)))
	if !now.Before(expires) {
		return refuse(http.StatusForbidden, "challenge_expired", "the challenge has expired; solve a new one")
	}
	difficulty := int(payload[8])
	if difficulty < w.Difficulty {
		// Issued under an earlier, easier spec.
		return refuse(http.StatusForbidden, "challenge_expired", "the challenge is easier than the queue now asks; solve a new one")
	}
	if LeadingZeroBits(challenge, nonce) < difficulty {
		_, refused := refuse(http.StatusForbidden, "challenge_failed", "the nonce does not solve the challenge")
		refused.Failed = true
		return nil, refused
	}
	return []queue.SingleUse{{ID: singleUseID("proof-of-work", challenge), Until: expires}}, nil
}

// LeadingZeroBits is the number of leading zero bits of SHA-256(challenge ":" nonce): the proof of
// work's measure, which a nonce must bring to the challenge's difficulty.
func LeadingZeroBits(challenge, nonce string) int {
	sum := sha256.Sum256([]byte(challenge + ":" + nonce))
	n := 0
	for i := 0; i < len(sum); i += 8 {
		w := binary.BigEndian.Uint64(sum[i:])
		n += bits.LeadingZeros64(w)
		if w != 0 {
			break
		}
	}
	return n
}

// Solve finds the first decimal nonce, from 0, that solves challenge at difficulty: what an API
// client runs (see docs/guides/entry-control.md).
func Solve(challenge string, difficulty int) string {
	for n := uint64(0); ; n++ {
		nonce := strconv.FormatUint(n, 10)
		if LeadingZeroBits(challenge, nonce) >= difficulty {
			return nonce
		}
	}
}

// entryRate counts a replica's entries in the current and the previous second.
type entryRate struct {
	mu            sync.Mutex
	second        int64
	current, last int
}

func (r *entryRate) add(now time.Time) {
	r.mu.Lock()
	r.roll(now.Unix())
	r.current++
	r.mu.Unlock()
}

// perSecond is the rate over the last second: the previous second's count, or the current one's when
// it is already higher.
func (r *entryRate) perSecond(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll(now.Unix())
	return float64(max(r.current, r.last))
}

func (r *entryRate) roll(second int64) {
	switch second {
	case r.second:
	case r.second + 1:
		r.second, r.last, r.current = second, r.current, 0
	default:
		r.second, r.last, r.current = second, 0, 0
	}
}
