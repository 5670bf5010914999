// Package admission is the admission proxy: the gate in front of a workload. It queues visitors in
// Redis through internal/queue, hands admitted visitors a signed pass, and forwards a request to a
// protected route only with a valid pass, checked in memory.
package admission

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/herdgate/herdgate/admission/pass"
	"github.com/herdgate/herdgate/internal/page"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/route"
	"github.com/herdgate/herdgate/internal/settings"
)

// Config is everything the proxy serves one queue with. It is immutable; a change builds a new one.
type Config struct {
	Namespace, Name string
	// Generation is the WaitingQueue generation the config was built from.
	Generation int64
	Routes     []route.Route
	// IdentityHeader, when set, names the trusted header that identifies visitors.
	IdentityHeader string
	Upstream       *url.URL
	FailurePolicy  herdgatev1alpha1.FailurePolicy
	// Mode is Queue, Passthrough or Closed.
	Mode   herdgatev1alpha1.Mode
	Signer *pass.Signer
	// PassTTL, Sliding and MaxSession say how passes are extended; CompletionRoutes end a session.
	PassTTL          time.Duration
	Sliding          bool
	MaxSession       time.Duration
	CompletionRoutes []route.Route
	// Plan, PollMin, PollMax and AbandonAfter come from the spec and apply until the scheduler
	// publishes its plan in Redis. Plan is the plan ticks run, and admits nobody when the spec
	// suspends the queue.
	Plan capacity.Plan
	// Tick is the plan's tick, suspended or not; Adaptive is set when the rate follows what the
	// replicas measure, which they then report every tick rather than every second (workload.go).
	Tick     time.Duration
	Adaptive bool
	// PollBudget is the most polls per second the waiting visitors may cost (spec.polling.budget).
	PollBudget float64
	// ExactPositions is how far from the front a status poll asks Redis; further back the proxy
	// answers from its snapshot of the queue (far.go).
	ExactPositions   int64
	PollMin, PollMax time.Duration
	AbandonAfter     time.Duration
	// Schedule, when set, opens the room at a set time (see phase.go).
	Schedule *settings.Schedule
	// Entry, when set, bounds the places one client takes; TrustedProxies say whose X-Forwarded-For
	// names the client (see client.go).
	Entry          *settings.EntryLimit
	TrustedProxies []netip.Prefix
	// Invitation, ProofOfWork and External, when set, are what an entry must bring (invitation.go,
	// challenge.go); Bypass the rules that need no pass (bypass.go).
	Invitation  *invitationCheck
	ProofOfWork *proofOfWork
	External    *externalChallenge
	Bypass      []bypassRule
	// bypassHeaders are the bypass rules' headers, which never reach the upstream.
	bypassHeaders []string
	// Page, when set, is the site's waiting page template; PageMessage is shown on the page and in
	// enter and status answers.
	Page        *page.Template
	PageMessage string
	// PageProblem says why the queue's page template is not served (the built-in page is).
	PageProblem error
}

// SecretValues reads the copy of a value a spec field refers to, by its key in the queue's Secret
// (herdgatev1alpha1.SecretRefKey); the proxy finds it beside the HMAC key in its mount.
type SecretValues func(key string) ([]byte, error)

// SecretFiles reads values from the files of dir, as mounted from the queue's Secret.
func SecretFiles(dir string) SecretValues {
	return func(key string) ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, key))
	}
}

// NewConfig builds the proxy's config from a WaitingQueue and its HMAC key with settings.Derive, the
// checks the manager runs too; an error names the field. A queue whose fields refer to Secrets needs
// NewConfigWithSecrets.
func NewConfig(wq *herdgatev1alpha1.WaitingQueue, hmacKey []byte) (*Config, error) {
	return NewConfigWithSecrets(wq, hmacKey, nil)
}

// NewConfigWithSecrets is NewConfig for a queue whose fields refer to Secret values, read with
// values; an error names the field whose value is missing or unfit.
func NewConfigWithSecrets(wq *herdgatev1alpha1.WaitingQueue, hmacKey []byte, values SecretValues) (*Config, error) {
	s, err := settings.Derive(wq)
	if err != nil {
		return nil, err
	}
	uid := string(wq.UID)
	if uid == "" {
		// Outside Kubernetes the queue has no UID; its name keeps passes of other queues out.
		uid = "file:" + wq.Namespace + "/" + wq.Name
	}
	signer, err := pass.NewSigner(uid, hmacKey)
	if err != nil {
		return nil, err
	}
	c := &Config{
		Namespace: s.Namespace, Name: s.Name, Generation: s.Generation, Routes: s.Routes,
		IdentityHeader: s.IdentityHeader, Upstream: s.Upstream, FailurePolicy: s.FailurePolicy, Mode: s.Mode, Signer: signer,
		PassTTL: s.PassTTL, Sliding: s.Sliding, MaxSession: s.MaxSession, CompletionRoutes: s.CompletionRoutes,
		PollMin: s.PollMin, PollMax: s.PollMax, AbandonAfter: s.AbandonAfter, Schedule: s.Schedule,
		Entry: s.Entry, TrustedProxies: s.TrustedProxies, Tick: s.Effective.Tick(), Adaptive: s.Adaptive != nil,
		PollBudget: s.PollBudget.PerSecond, ExactPositions: s.ExactPositions,
	}
	if s.Admits() {
		c.Plan = s.Effective
	}
	if err := c.applyEdge(s, hmacKey, values); err != nil {
		return nil, err
	}
	return c, nil
}

// applyEdge fills the entry's checks and the bypass rules, reading the values they refer to.
func (c *Config) applyEdge(s *settings.Settings, hmacKey []byte, values SecretValues) error {
	read := func(ref settings.SecretRef) ([]byte, error) {
		if values == nil {
			return nil, fmt.Errorf("%s: Secret %s key %s: no Secret values to read", ref.Field, ref.Name, ref.Key)
		}
		v, err := values(herdgatev1alpha1.SecretRefKey(ref.Name, ref.Key))
		if err != nil {
			return nil, fmt.Errorf("%s: Secret %s key %s: %w", ref.Field, ref.Name, ref.Key, err)
		}
		return v, ref.CheckValue(v)
	}
	if inv := s.Invitation; inv != nil {
		key, err := read(inv.Key)
		if err != nil {
			return err
		}
		c.Invitation = &invitationCheck{key: key, audience: s.Namespace + "/" + s.Name, singleUse: inv.SingleUse}
	}
	if pow := s.ProofOfWork; pow != nil {
		c.ProofOfWork = newProofOfWork(*pow, hmacKey, s.Namespace+"/"+s.Name)
	}
	if ext := s.External; ext != nil {
		secret, err := read(ext.Secret)
		if err != nil {
			return err
		}
		c.External = &externalChallenge{verifyURL: ext.VerifyURL, secret: string(secret), timeout: ext.Timeout}
	}
	if pg := s.Page; pg != nil {
		c.PageMessage = pg.Message
		if ref := pg.Template; ref != nil {
			// A template that cannot serve leaves the built-in page, never the queue without a config:
			// the manager reports it (PageTemplateInvalid) and keeps the last good copy in the mount.
			text, err := []byte(nil), error(nil)
			if values == nil {
				err = errors.New("no values to read")
			} else {
				text, err = values(herdgatev1alpha1.ConfigMapRefKey(ref.Name, ref.Key))
			}
			if err == nil {
				c.Page, err = page.Parse(string(text))
			}
			if err != nil {
				c.PageProblem = fmt.Errorf("%s: ConfigMap %s key %s: %w", ref.Field, ref.Name, ref.Key, err)
			}
		}
	}
	for _, b := range s.Bypass {
		rule := bypassRule{name: b.Name, cidrs: b.CIDRs, header: b.Header, path: b.Path}
		if b.Header != "" {
			v, err := read(b.HeaderValue)
			if err != nil {
				return err
			}
			rule.value = v
			c.bypassHeaders = append(c.bypassHeaders, b.Header)
		}
		c.Bypass = append(c.Bypass, rule)
	}
	return nil
}

// FileConfig is the proxy's config file: the WaitingQueue as it would be applied, the Redis URL and
// the HMAC key, for running the proxy outside Kubernetes.
type FileConfig struct {
	// WaitingQueue is the queue the proxy serves.
	WaitingQueue herdgatev1alpha1.WaitingQueue `json:"waitingQueue"`
	// RedisURL is the Redis holding the queue.
	RedisURL string `json:"redisURL"`
	// HMACKey is the base64 key (at least 32 bytes) that signs passes; the scheduler does not need it.
	HMACKey string `json:"hmacKey"`
	// Secrets are the values the queue's fields refer to (spec.entry.invitation.keySecretRef and
	// the like), by Secret name and key, as in a Secret's stringData.
	Secrets map[string]map[string]string `json:"secrets,omitempty"`
	// ConfigMaps are the ConfigMap values the queue's fields refer to (spec.page.template), by
	// ConfigMap name and key.
	ConfigMaps map[string]map[string]string `json:"configMaps,omitempty"`
}

// values reads the file's Secrets as the proxy reads its mount.
func (fc *FileConfig) values() SecretValues {
	byKey := map[string][]byte{}
	for name, keys := range fc.Secrets {
		for key, v := range keys {
			byKey[herdgatev1alpha1.SecretRefKey(name, key)] = []byte(v)
		}
	}
	for name, keys := range fc.ConfigMaps {
		for key, v := range keys {
			byKey[herdgatev1alpha1.ConfigMapRefKey(name, key)] = []byte(v)
		}
	}
	return func(key string) ([]byte, error) {
		v, ok := byKey[key]
		if !ok {
			return nil, errors.New("not in the config file's secrets")
		}
		return v, nil
	}
}

// LoadFile reads and checks a config file. Errors name the file and the field.
func LoadFile(path string) (*Config, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	// The queue first meets the checks the API server would run on it, which name the field at fault;
	// Go's decoder, next, names none (a time it cannot parse, a duration it cannot read).
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	var doc struct {
		WaitingQueue map[string]any `json:"waitingQueue"`
	}
	if err := utiljson.Unmarshal(asJSON, &doc); err == nil && doc.WaitingQueue != nil {
		if err := settings.ValidateObject(doc.WaitingQueue); err != nil {
			return nil, "", fmt.Errorf("%s: waitingQueue.%w", path, err)
		}
	}
	fc := FileConfig{}
	if err := yaml.UnmarshalStrict(raw, &fc); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if fc.RedisURL == "" {
		return nil, "", fmt.Errorf("%s: redisURL: required", path)
	}
	key, err := base64.StdEncoding.DecodeString(fc.HMACKey)
	if err != nil {
		return nil, "", fmt.Errorf("%s: hmacKey: not base64: %w", path, err)
	}
	if len(key) < 32 {
		return nil, "", fmt.Errorf("%s: hmacKey: %d bytes, at least 32 required", path, len(key))
	}
	cfg, err := NewConfigWithSecrets(&fc.WaitingQueue, key, fc.values())
	if err != nil {
		if errors.As(err, new(*settings.FieldError)) {
			return nil, "", fmt.Errorf("%s: waitingQueue.%w", path, err)
		}
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg, fc.RedisURL, nil
}
