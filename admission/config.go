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
	"time"

	"github.com/herdgate/herdgate/admission/pass"

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
	Plan             capacity.Plan
	PollMin, PollMax time.Duration
	AbandonAfter     time.Duration
	// Schedule, when set, opens the room at a set time (see phase.go).
	Schedule *settings.Schedule
	// Entry, when set, bounds the places one client takes; TrustedProxies say whose X-Forwarded-For
	// names the client (see client.go).
	Entry          *settings.EntryLimit
	TrustedProxies []netip.Prefix
}

// NewConfig builds the proxy's config from a WaitingQueue and its HMAC key with settings.Derive, the
// checks the manager runs too; an error names the field.
func NewConfig(wq *herdgatev1alpha1.WaitingQueue, hmacKey []byte) (*Config, error) {
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
		Entry: s.Entry, TrustedProxies: s.TrustedProxies,
	}
	if s.Admits() {
		c.Plan = s.Effective
	}
	return c, nil
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
}

// LoadFile reads and checks a config file. Errors name the file and the field.
func LoadFile(path string) (*Config, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
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
	cfg, err := NewConfig(&fc.WaitingQueue, key)
	if err != nil {
		if errors.As(err, new(*settings.FieldError)) {
			return nil, "", fmt.Errorf("%s: waitingQueue.%w", path, err)
		}
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg, fc.RedisURL, nil
}
