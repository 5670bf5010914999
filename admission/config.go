// Package admission is the admission proxy: the gate in front of a workload. It queues visitors in
// Redis through internal/queue, hands admitted visitors a signed pass, and forwards a request to a
// protected route only with a valid pass, checked in memory.
package admission

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
)

// Config is everything the proxy serves one queue with. It is immutable; a change builds a new one.
type Config struct {
	Namespace, Name string
	Routes          []Route
	// IdentityHeader, when set, names the trusted header that identifies visitors.
	IdentityHeader string
	Upstream       *url.URL
	FailurePolicy  herdgatev1alpha1.FailurePolicy
	Signer         *Signer
	// Plan, PollMin, PollMax and AbandonAfter come from the spec and apply until the scheduler
	// publishes its plan in Redis. Plan admits nobody when the spec suspends the queue.
	Plan             capacity.Plan
	PollMin, PollMax time.Duration
	AbandonAfter     time.Duration
}

type configError struct{ msg string }

func (e configError) Error() string { return e.msg }

func fieldError(format string, args ...any) error { return configError{fmt.Sprintf(format, args...)} }

var headerName = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]*$`)

// NewConfig builds the proxy's config from a WaitingQueue and its HMAC key, checking every field the
// proxy uses; an error names the field.
func NewConfig(wq *herdgatev1alpha1.WaitingQueue, hmacKey []byte) (*Config, error) {
	if wq.Name == "" || wq.Namespace == "" {
		return nil, fieldError("metadata: namespace and name are required")
	}
	uid := string(wq.UID)
	if uid == "" {
		// Outside Kubernetes the queue has no UID; its name keeps passes of other queues out.
		uid = "file:" + wq.Namespace + "/" + wq.Name
	}
	signer, err := NewSigner(uid, hmacKey)
	if err != nil {
		return nil, err
	}
	spec := &wq.Spec
	routes, err := compileRoutes(spec.ProtectedRoutes)
	if err != nil {
		return nil, fieldError("spec.%v", err)
	}
	if len(routes) == 0 {
		return nil, fieldError("spec.protectedRoutes: at least one route is required")
	}
	upstream, err := upstreamURL(wq)
	if err != nil {
		return nil, err
	}
	c := &Config{
		Namespace: wq.Namespace, Name: wq.Name, Routes: routes, Upstream: upstream, Signer: signer,
		FailurePolicy: spec.EffectiveFailurePolicy(), AbandonAfter: spec.EffectiveAbandonAfter(),
	}
	c.PollMin, c.PollMax = spec.EffectivePolling()
	switch {
	case c.FailurePolicy != herdgatev1alpha1.FailClosed && c.FailurePolicy != herdgatev1alpha1.FailOpen:
		return nil, fieldError("spec.proxy.failurePolicy: %q is neither FailClosed nor FailOpen", c.FailurePolicy)
	case c.PollMin <= 0 || c.PollMax < c.PollMin:
		return nil, fieldError("spec.polling: minInterval %s must be positive and at most maxInterval %s", c.PollMin, c.PollMax)
	case c.AbandonAfter <= 0:
		return nil, fieldError("spec.abandonAfter: must be positive")
	}
	if !spec.IsSuspended() {
		in := capacity.Input{
			PoolSize: int64(spec.Capacity.PoolSize), RequestLatency: spec.Capacity.RequestLatency.Duration,
			UtilizationPercent: int64(spec.EffectiveUtilizationPercent()), Tick: spec.EffectiveTick(),
		}
		if spec.Capacity.BatchSizeOverride != nil {
			in.BatchSizeOverride = int64(*spec.Capacity.BatchSizeOverride)
		}
		if c.Plan, err = capacity.New(in); err != nil {
			return nil, fieldError("spec.capacity: %v", err)
		}
	}
	if spec.Identity != nil && spec.Identity.Header != "" {
		if !headerName.MatchString(spec.Identity.Header) {
			return nil, fieldError("spec.identity.header: %q is not a header name", spec.Identity.Header)
		}
		c.IdentityHeader = http.CanonicalHeaderKey(spec.Identity.Header)
	}
	return c, nil
}

func upstreamURL(wq *herdgatev1alpha1.WaitingQueue) (*url.URL, error) {
	up := wq.Spec.Upstream
	switch {
	case up.Service != nil && up.URL == nil:
		if up.Service.Name == "" || up.Service.Port < 1 || up.Service.Port > 65535 {
			return nil, fieldError("spec.upstream.service: name and a port between 1 and 65535 are required")
		}
		return &url.URL{Scheme: "http", Host: up.Service.Name + "." + wq.Namespace + ".svc:" + strconv.Itoa(int(up.Service.Port))}, nil
	case up.URL != nil && up.Service == nil:
		u, err := url.Parse(*up.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fieldError("spec.upstream.url: %q is not an absolute http or https URL", *up.URL)
		}
		return u, nil
	default:
		return nil, fieldError("spec.upstream: exactly one of service or url must be set")
	}
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
		if errors.As(err, new(configError)) {
			return nil, "", fmt.Errorf("%s: waitingQueue.%w", path, err)
		}
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg, fc.RedisURL, nil
}
