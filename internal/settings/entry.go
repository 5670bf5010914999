package settings

import (
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/route"
)

// SecretRef is a Secret key a field refers to; Field is where, as the API server names it.
// MinLength is the fewest bytes its value may hold.
type SecretRef struct {
	Field     string
	Name, Key string
	MinLength int
}

// The fewest bytes a value the spec refers to may hold, by what it is for.
const (
	// MinInvitationKey: HMAC-SHA256 wants a key at least as long as its output.
	MinInvitationKey = 32
	// MinBypassValue: a guessable bypass value would open the gate to whoever guesses it.
	MinBypassValue = 16
	// MinReleaseKey: a guessable release key would let anyone end visitors' sessions.
	MinReleaseKey = 16
	// MinChallengeSecret: a provider's secret is whatever it gave, but never empty.
	MinChallengeSecret = 1
)

// CheckValue tells why value cannot serve as ref's, or returns nil: the one check of a referenced
// value, which the manager runs before it copies the value to the proxies, and the proxy when it
// reads its copy.
func (ref SecretRef) CheckValue(value []byte) error {
	if len(value) < ref.MinLength {
		return fmt.Errorf("%s: Secret %s key %s holds %d bytes, at least %d required", ref.Field, ref.Name, ref.Key, len(value), ref.MinLength)
	}
	return nil
}

// Shadow is spec.entry.shadowQueue: which entries go to the queue that never admits.
type Shadow struct {
	ChallengeFailed bool
	// OverLimitFactor, when positive, shadows a client that asks for this many times its burst.
	OverLimitFactor int
}

// Page is spec.page: a template from a ConfigMap (Template.Name and Key are the ConfigMap's), a
// message, and the status of the answers a waiting visitor gets (QueueingStatus; 0 when unset, which
// is 200 without Retry-After).
type Page struct {
	Template       *SecretRef
	Message        string
	QueueingStatus int
}

// Invitation is spec.entry.invitation.
type Invitation struct {
	Key       SecretRef
	SingleUse bool
}

// ProofOfWork is spec.entry.challenge.proofOfWork with its defaults: Difficulty bits, raised while a
// replica takes more than RaiseAbove entries a second (0: never), up to MaxDifficulty.
type ProofOfWork struct {
	Difficulty, RaiseAbove, MaxDifficulty int
}

// ExternalChallenge is spec.entry.challenge.external.
type ExternalChallenge struct {
	VerifyURL string
	Secret    SecretRef
	Timeout   time.Duration
}

// BypassRule is one spec.bypass rule; exactly one of CIDRs, Header or Path is set.
type BypassRule struct {
	Name  string
	CIDRs []netip.Prefix
	// Header is the canonical header name whose value must be HeaderValue's.
	Header      string
	HeaderValue SecretRef
	Path        *route.Route
}

// Defaults of the proof of work.
const (
	DefaultProofOfWorkDifficulty = 16
	MaxProofOfWorkDifficulty     = 24
	// DefaultDifficultyRaise is how many bits above difficulty maxDifficulty defaults to.
	DefaultDifficultyRaise = 4
	DefaultExternalTimeout = 3 * time.Second
)

var (
	secretName    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	secretKey     = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	bypassName    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	refusedBypass = []string{"host", "cookie", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect", "forwarded", "via"}
	refusedPrefix = []string{"x-forwarded-", "x-herdgate-", "herdgate-", "proxy-"}
)

func secretRef(field string, r herdgatev1alpha1.SecretValueRef, minLength int) (SecretRef, error) {
	switch {
	case len(r.Name) > 253 || !secretName.MatchString(r.Name):
		return SecretRef{}, fieldErr(field+".name", "%q is not a Secret name", r.Name)
	case len(r.Key) > 253 || !secretKey.MatchString(r.Key) || r.Key == "." || r.Key == "..":
		return SecretRef{}, fieldErr(field+".key", "%q is not a Secret data key", r.Key)
	}
	return SecretRef{Field: field, Name: r.Name, Key: r.Key, MinLength: minLength}, nil
}

// deriveEntry fills the entry's invitation and challenge and the bypass rules.
func (s *Settings) deriveEntry(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	if e := spec.Entry; e != nil {
		if inv := e.Invitation; inv != nil {
			key, err := secretRef("spec.entry.invitation.keySecretRef", inv.KeySecretRef, MinInvitationKey)
			if err != nil {
				return err
			}
			s.Invitation = &Invitation{Key: key, SingleUse: inv.SingleUse}
		}
		if c := e.Challenge; c != nil {
			if (c.ProofOfWork == nil) == (c.External == nil) {
				return fieldErr("spec.entry.challenge", "exactly one of proofOfWork or external must be set")
			}
			if pow := c.ProofOfWork; pow != nil {
				p, err := proofOfWork(pow)
				if err != nil {
					return err
				}
				s.ProofOfWork = p
			}
			if ext := c.External; ext != nil {
				x, err := externalChallenge(ext)
				if err != nil {
					return err
				}
				s.External = x
			}
		}
	}
	if pg := spec.Page; pg != nil {
		s.Page = &Page{Message: pg.Message}
		if n := utf8.RuneCountInString(pg.Message); n > 500 {
			return fieldErr("spec.page.message", "%d characters, at most 500", n)
		}
		if c := pg.QueueingStatusCode; c != nil {
			if *c != 200 && *c != 202 && *c != 429 {
				return fieldErr("spec.page.queueingStatusCode", "%d, one of 200, 202 or 429 expected", *c)
			}
			s.Page.QueueingStatus = int(*c)
		}
		if t := pg.Template; t != nil {
			ref, err := secretRef("spec.page.template", herdgatev1alpha1.SecretValueRef{Name: t.Name, Key: t.Key}, 0)
			if err != nil {
				return err
			}
			s.Page.Template = &ref
		}
	}
	if e := spec.Entry; e != nil && e.ShadowQueue != nil {
		sq := e.ShadowQueue
		sh := &Shadow{ChallengeFailed: sq.ChallengeFailed}
		if f := sq.OverEntryLimitFactor; f != nil {
			if *f < 2 || *f > 100 {
				return fieldErr("spec.entry.shadowQueue.overEntryLimitFactor", "%d, 2 to 100 expected", *f)
			}
			sh.OverLimitFactor = int(*f)
		}
		switch {
		case !sh.ChallengeFailed && sh.OverLimitFactor == 0:
			return fieldErr("spec.entry.shadowQueue", "needs challengeFailed or overEntryLimitFactor")
		case sh.ChallengeFailed && e.Challenge == nil:
			return fieldErr("spec.entry.shadowQueue.challengeFailed", "needs entry.challenge")
		case sh.OverLimitFactor > 0 && s.Entry == nil:
			return fieldErr("spec.entry.shadowQueue.overEntryLimitFactor", "needs entry.perClient")
		}
		s.Shadow = sh
	}
	seen := map[string]bool{}
	for i, b := range spec.Bypass {
		field := fmt.Sprintf("spec.bypass[%d]", i)
		rule, err := bypassRule(field, b)
		if err != nil {
			return err
		}
		if seen[rule.Name] {
			return fieldErr(field+".name", "%q names two rules", rule.Name)
		}
		seen[rule.Name] = true
		s.Bypass = append(s.Bypass, rule)
	}
	return nil
}

func proofOfWork(pow *herdgatev1alpha1.ProofOfWorkSpec) (*ProofOfWork, error) {
	p := &ProofOfWork{Difficulty: int(pow.Difficulty)}
	if p.Difficulty == 0 {
		p.Difficulty = DefaultProofOfWorkDifficulty
	}
	if p.Difficulty < 1 || p.Difficulty > MaxProofOfWorkDifficulty {
		return nil, fieldErr("spec.entry.challenge.proofOfWork.difficulty", "%d is outside 1 … %d", p.Difficulty, MaxProofOfWorkDifficulty)
	}
	p.MaxDifficulty = p.Difficulty
	if pow.RaiseAbove != nil {
		p.RaiseAbove = int(*pow.RaiseAbove)
		if p.RaiseAbove < 1 || p.RaiseAbove > 1000000 {
			return nil, fieldErr("spec.entry.challenge.proofOfWork.raiseAbove", "%d is outside 1 … 1000000", p.RaiseAbove)
		}
		p.MaxDifficulty = min(MaxProofOfWorkDifficulty, p.Difficulty+DefaultDifficultyRaise)
	}
	if pow.MaxDifficulty != nil {
		if pow.RaiseAbove == nil {
			return nil, fieldErr("spec.entry.challenge.proofOfWork.maxDifficulty", "needs proofOfWork.raiseAbove")
		}
		p.MaxDifficulty = int(*pow.MaxDifficulty)
		if p.MaxDifficulty < p.Difficulty || p.MaxDifficulty > MaxProofOfWorkDifficulty {
			return nil, fieldErr("spec.entry.challenge.proofOfWork.maxDifficulty", "%d is outside difficulty (%d) … %d", p.MaxDifficulty, p.Difficulty, MaxProofOfWorkDifficulty)
		}
	}
	return p, nil
}

func externalChallenge(ext *herdgatev1alpha1.ExternalChallengeSpec) (*ExternalChallenge, error) {
	u, err := CheckUpstreamURL(ext.VerifyURL)
	if err != nil {
		return nil, fieldErr("spec.entry.challenge.external.verifyURL", "%v", err)
	}
	secret, err := secretRef("spec.entry.challenge.external.secretKeyRef", ext.SecretKeyRef, MinChallengeSecret)
	if err != nil {
		return nil, err
	}
	x := &ExternalChallenge{VerifyURL: u.String(), Secret: secret, Timeout: DefaultExternalTimeout}
	if ext.Timeout != nil {
		x.Timeout = ext.Timeout.Duration
		if x.Timeout < 100*time.Millisecond || x.Timeout > 30*time.Second {
			return nil, fieldErr("spec.entry.challenge.external.timeout", "%s is outside 100ms … 30s", x.Timeout)
		}
	}
	return x, nil
}

func bypassRule(field string, b herdgatev1alpha1.BypassRule) (BypassRule, error) {
	if len(b.Name) > 63 || !bypassName.MatchString(b.Name) {
		return BypassRule{}, fieldErr(field+".name", "%q is not lower-case letters, digits and '-'", b.Name)
	}
	rule := BypassRule{Name: b.Name}
	kinds := 0
	if len(b.SourceCIDRs) > 0 {
		kinds++
		for j, c := range b.SourceCIDRs {
			p, err := netip.ParsePrefix(string(c))
			if err != nil {
				return BypassRule{}, fieldErr(fmt.Sprintf("%s.sourceCIDRs[%d]", field, j), "%q is not a CIDR such as 10.0.0.0/8", c)
			}
			rule.CIDRs = append(rule.CIDRs, p.Masked())
		}
	}
	if h := b.Header; h != nil {
		kinds++
		lower := strings.ToLower(h.Name)
		refused := len(h.Name) > MaxIdentityHeaderLength || !headerName.MatchString(h.Name)
		for _, r := range refusedBypass {
			refused = refused || lower == r
		}
		for _, p := range refusedPrefix {
			refused = refused || strings.HasPrefix(lower, p)
		}
		if refused {
			return BypassRule{}, fieldErr(field+".header.name", "%q is not a header a bypass can use", h.Name)
		}
		value, err := secretRef(field+".header.valueSecretRef", h.ValueSecretRef, MinBypassValue)
		if err != nil {
			return BypassRule{}, err
		}
		rule.Header, rule.HeaderValue = http.CanonicalHeaderKey(h.Name), value
	}
	for _, p := range []struct {
		value  *herdgatev1alpha1.RoutePath
		prefix bool
		name   string
	}{{b.Path, false, "path"}, {b.PathPrefix, true, "pathPrefix"}} {
		if p.value == nil {
			continue
		}
		kinds++
		r, err := route.New(string(*p.value), p.prefix, route.Methods)
		if err != nil {
			return BypassRule{}, fieldErr(field+"."+p.name, "%q %v", *p.value, err)
		}
		rule.Path = &r
	}
	if kinds != 1 {
		return BypassRule{}, fieldErr(field, "exactly one of sourceCIDRs, header, path or pathPrefix must be set")
	}
	return rule, nil
}

// SecretRefs are the Secret keys the settings refer to, which the proxy reads from its mounts.
func (s *Settings) SecretRefs() []SecretRef {
	var refs []SecretRef
	if s.Invitation != nil {
		refs = append(refs, s.Invitation.Key)
	}
	if s.External != nil {
		refs = append(refs, s.External.Secret)
	}
	if s.ReleaseKey != nil {
		refs = append(refs, *s.ReleaseKey)
	}
	for _, b := range s.Bypass {
		if b.Header != "" {
			refs = append(refs, b.HeaderValue)
		}
	}
	return append(refs, s.laneRefs()...)
}
