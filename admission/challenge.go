package admission

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/bits"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/settings"
)

// Headers of the challenges on enter.
const (
	// ProofHeader carries a solved proof of work: the challenge, ':', the nonce.
	ProofHeader = "X-Herdgate-Proof"
	// ChallengeResponseHeader carries the token an external challenge's widget gave the client.
	ChallengeResponseHeader = "X-Herdgate-Challenge-Response"
	// ProofOfWorkAlgorithm names the built-in proof of work: SHA-256 of challenge ":" nonce must
	// start with difficulty zero bits.
	ProofOfWorkAlgorithm = "sha256-leading-zero-bits"
	// challengeLifetime is how long a challenge may be solved and used.
	challengeLifetime = 2 * time.Minute
	// maxNonce bounds a nonce: letters and digits, at most this many.
	maxNonce = 32
	// challengeVersion starts every challenge this proxy issues.
	challengeVersion = "v1"
)

// proofOfWork issues and checks the built-in challenge. A challenge is self-contained and signed, so
// any replica checks one another issued: "v1.", the base64url payload (expiry in Unix ms, the
// difficulty, 16 random bytes), ".", a MAC of the payload.
type proofOfWork struct {
	settings.ProofOfWork
	key   []byte
	queue string
	rate  *entryRate
}

func newProofOfWork(s settings.ProofOfWork, hmacKey []byte, queueName string) *proofOfWork {
	m := hmac.New(sha256.New, hmacKey)
	m.Write([]byte("herdgate proof-of-work key\x00" + queueName))
	return &proofOfWork{ProofOfWork: s, key: m.Sum(nil), queue: queueName, rate: &entryRate{}}
}

// challengeBody is the answer of GET /.herdgate/challenge.
type challengeBody struct {
	Algorithm  string    `json:"algorithm"`
	Challenge  string    `json:"challenge"`
	Difficulty int       `json:"difficulty"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// difficultyAt is the difficulty of a challenge issued now: the spec's, plus one bit for each doubling
// of the entries a second above raiseAbove, up to maxDifficulty.
func (w *proofOfWork) difficultyAt(now time.Time) int {
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

func (w *proofOfWork) issue(now time.Time) challengeBody {
	difficulty := w.difficultyAt(now)
	expires := now.Add(challengeLifetime).Truncate(time.Millisecond)
	payload := make([]byte, 8+1+16)
	binary.BigEndian.PutUint64(payload, uint64(expires.UnixMilli()))
	payload[8] = byte(difficulty)
	_, _ = rand.Read(payload[9:])
	c := challengeVersion + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(w.mac(payload))
	return challengeBody{Algorithm: ProofOfWorkAlgorithm, Challenge: c, Difficulty: difficulty, ExpiresAt: expires.UTC()}
}

func (w *proofOfWork) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, w.key)
	m.Write(payload)
	return m.Sum(nil)[:16]
}

// verify checks a proof, "challenge:nonce", at now; it returns the single-use token that keeps the
// solution from entering a second visitor, or why the entry is refused.
func (w *proofOfWork) verify(proof string, now time.Time) ([]queue.SingleUse, *refusal) {
	refuse := func(status int, code, message string) ([]queue.SingleUse, *refusal) {
		return nil, &refusal{status, errorBody{Error: code, Message: message, Header: ProofHeader, Enter: reservedPrefix + "/challenge"}}
	}
	if proof == "" {
		return refuse(http.StatusUnauthorized, "challenge_required", "solve the proof of work from "+reservedPrefix+"/challenge and enter with it")
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
		return refuse(http.StatusForbidden, "challenge_failed", "the nonce does not solve the challenge")
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
// client runs (see the README's "Proof of work").
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

// externalChallenge verifies a widget's token with the provider (spec.entry.challenge.external).
type externalChallenge struct {
	verifyURL string
	secret    string
	timeout   time.Duration
}

// verifyAnswer is the provider's answer, as Turnstile and hCaptcha write it.
type verifyAnswer struct {
	Success    bool     `json:"success"`
	ErrorCodes []string `json:"error-codes"`
}

// verify asks the provider about response, from the client at remoteIP; it returns the single-use
// token that keeps the response from entering a second visitor, or why the entry is refused.
func (e *externalChallenge) verify(client *http.Client, response, remoteIP string, now time.Time) ([]queue.SingleUse, *refusal) {
	refuse := func(status int, code, message string) ([]queue.SingleUse, *refusal) {
		return nil, &refusal{status, errorBody{Error: code, Message: message, Header: ChallengeResponseHeader}}
	}
	if response == "" {
		return refuse(http.StatusUnauthorized, "challenge_required", "solve the site's challenge and enter with its response")
	}
	if len(response) > 4096 {
		return refuse(http.StatusBadRequest, "challenge_invalid", "the challenge response is too long")
	}
	form := url.Values{"secret": {e.secret}, "response": {response}}
	if remoteIP != "" {
		form.Set("remoteip", remoteIP)
	}
	c := *client
	c.Timeout = e.timeout
	res, err := c.PostForm(e.verifyURL, form)
	if err != nil {
		return refuse(http.StatusServiceUnavailable, "challenge_unavailable", "the challenge could not be verified; try again shortly")
	}
	defer res.Body.Close()
	answer := verifyAnswer{}
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&answer) != nil {
		return refuse(http.StatusServiceUnavailable, "challenge_unavailable", "the challenge could not be verified; try again shortly")
	}
	if !answer.Success {
		message := "the challenge was not solved"
		if len(answer.ErrorCodes) > 0 {
			message += ": " + strings.Join(answer.ErrorCodes, ", ")
		}
		return refuse(http.StatusForbidden, "challenge_failed", message)
	}
	// Providers spend a response once; the engine does too, for providers that do not.
	return []queue.SingleUse{{ID: singleUseID("external", response), Until: now.Add(challengeLifetime)}}, nil
}
