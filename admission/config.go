// Package admission is the admission proxy: the gate in front of a workload. It queues visitors in
// Redis through internal/queue, hands admitted visitors a signed pass, and forwards a request to a
// protected route only with a valid pass, checked in memory.
package admission

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/herdgate/herdgate/admission/entry"
	"github.com/herdgate/herdgate/internal/page"
	"github.com/herdgate/herdgate/internal/pass"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/settings"
)

// Config is everything the proxy serves one room with: the room's settings, as the manager and the
// scheduler derive them too, and what the proxy makes of them with the Secret values they refer to
// (the pass signer, the entry checks, the bypass lanes, the page template). It is immutable; a
// change builds a new one.
type Config struct {
	settings.Settings

	// Signer signs visitor cookies and places, and HMAC passes. Passes issues and verifies the
	// room's passes: Signer's, or JWT passes (spec.pass.format) signed with the keys of the room's
	// Secret.
	Signer *pass.Signer
	Passes pass.Passes
	// JWKS is the public keys of ES256 JWT passes, served at /.herdgate/jwks.json; nil otherwise.
	JWKS []byte
	// releaseKey, when set, authenticates the workload's POST /.herdgate/release, and requests with
	// a valid pass carry their session's handle upstream.
	releaseKey []byte
	// Quota is the plan ticks run, which admits nobody when the spec suspends the room; it applies
	// until the scheduler publishes its plan in Redis.
	Quota capacity.Plan
	// EntryChecks are what an entry must bring, in order: the client's limit, the invitation, the
	// proof of work or the external challenge (package entry). BypassLanes let requests to protected
	// routes through without a pass; bypassHeaders are their headers, never forwarded.
	EntryChecks   entry.Chain
	BypassLanes   entry.Chain
	bypassHeaders []string
	// ProofOfWork, when set, issues the challenges an entry must solve.
	ProofOfWork *entry.ProofOfWork
	// invitationTokens is how many of an entry's single-use tokens come from its invitation.
	invitationTokens int
	// clients tells a request's client from the trusted proxies.
	clients entry.Clients
	// pollingClients, with spec.entry.perClient, names the client whose polls a replica bounds to
	// Entry.PollsPerSecond (visitorAPI.overClientRate).
	pollingClients *entry.ClientLimit
	// PageTemplate, when set, is the site's waiting page template; PageProblem says why the room's
	// template is not served (the built-in page is).
	PageTemplate *page.Template
	PageProblem  error
	// Cookies are the names of the room's cookies: the base names (PassCookie, ...) with the room's
	// suffix (herdgatev1alpha1.CookieName).
	Cookies CookieNames
	// events are the configs of the room's events (spec.events), in the order of Settings.Events.
	events []*Config
	// room is, in an event's config, the room's own (which holds the calendar); nil in the room's.
	room *Config
}

// roomConfig is the room's own config, whichever event's c is.
func (c *Config) roomConfig() *Config {
	if c.room != nil {
		return c.room
	}
	return c
}

// At is the config in force at t: the event's then (spec.events), or the room's own. Each request is
// decided under the config in force when it came.
func (c *Config) At(t time.Time) *Config {
	for i := range c.events {
		if e := &c.Events[i]; !t.Before(e.From) && t.Before(e.End) {
			return c.events[i]
		}
	}
	return c
}

// applyEvents makes the config of each event: the room's, with the event's settings, plan and page.
func (c *Config) applyEvents(values SecretValues) {
	for _, e := range c.Events {
		ec := *c
		ec.Settings, ec.events, ec.room, ec.Quota = *e.Settings, nil, c, capacity.Plan{}
		if ec.Admits() {
			ec.Quota = ec.Effective
		}
		ec.PageTemplate, ec.PageProblem = nil, nil
		if pg := ec.Page; pg != nil && pg.Template != nil {
			ec.PageTemplate, ec.PageProblem = readPageTemplate(*pg.Template, values)
		}
		c.events = append(c.events, &ec)
	}
}

// laneShare is the percentage of every tick's batch the lane named lane takes ("" for the main
// queue, which takes what the lanes leave).
func (c *Config) laneShare(lane string) int64 {
	rest := int64(100)
	for _, l := range c.Lanes {
		if l.Name == lane {
			return int64(l.Percent)
		}
		rest -= int64(l.Percent)
	}
	return rest
}

// Tick is the tick of the plan the room runs, suspended or not.
func (c *Config) Tick() time.Duration { return c.Effective.Tick() }

// PageMessage is the operator's notice on the waiting page and in enter and status answers.
func (c *Config) PageMessage() string {
	if c.Page == nil {
		return ""
	}
	return c.Page.Message
}

// SecretValues reads the copy of a value a spec field refers to, by its key in the room's Secret
// (herdgatev1alpha1.SecretRefKey); the proxy finds it beside the HMAC key in its mount.
type SecretValues func(key string) ([]byte, error)

// SecretFiles reads values from the files of dir, as mounted from the room's Secret.
func SecretFiles(dir string) SecretValues {
	return func(key string) ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, key))
	}
}

// NewConfig builds the proxy's config from a WaitingQueue and its HMAC key with settings.Derive, the
// checks the manager runs too; an error names the field. A room whose fields refer to Secrets needs
// NewConfigWithSecrets.
func NewConfig(wq *herdgatev1alpha1.WaitingQueue, hmacKey []byte) (*Config, error) {
	return NewConfigWithSecrets(wq, hmacKey, nil)
}

// NewConfigWithSecrets is NewConfig for a room whose fields refer to Secret values, read with
// values; an error names the field whose value is missing or unfit.
func NewConfigWithSecrets(wq *herdgatev1alpha1.WaitingQueue, hmacKey []byte, values SecretValues) (*Config, error) {
	s, err := settings.Derive(wq)
	if err != nil {
		return nil, err
	}
	room := pass.Room{UID: string(wq.UID), Namespace: wq.Namespace, Name: wq.Name, HMACKey: hmacKey}
	if s.PassFormat == herdgatev1alpha1.PassFormatJWT {
		keys, err := readPassKeys(values)
		if err != nil {
			return nil, err
		}
		room.JWT, room.JWTKeys = true, keys
	}
	signer, passes, err := room.Passes()
	if err != nil {
		if room.JWT {
			return nil, fmt.Errorf("spec.pass.format: %w", err)
		}
		return nil, err
	}
	c := &Config{Settings: *s, Signer: signer, Passes: passes, clients: entry.Clients{Trusted: s.TrustedProxies}, Cookies: CookieNamesOf(wq.Namespace, wq.Name)}
	if jwts, ok := passes.(*pass.JWTPasses); ok && s.PassAlgorithm == herdgatev1alpha1.PassAlgorithmES256 {
		if c.JWKS, err = jwts.Keys().PublicJWKS(); err != nil {
			return nil, err
		}
	}
	if s.Admits() {
		c.Quota = s.Effective
	}
	if err := c.applyEntry(hmacKey, values); err != nil {
		return nil, err
	}
	c.applyEvents(values)
	return c, nil
}

// readPageTemplate reads and parses the site's page template ref names. A template that cannot
// serve leaves the built-in page, never the room without a config: the manager reports it
// (PageTemplateInvalid) and keeps the last good copy in the mount; the error says why.
func readPageTemplate(ref settings.SecretRef, values SecretValues) (*page.Template, error) {
	text, err := []byte(nil), error(nil)
	if values == nil {
		err = errors.New("no values to read")
	} else {
		text, err = values(herdgatev1alpha1.ConfigMapRefKey(ref.Name, ref.Key))
	}
	var t *page.Template
	if err == nil {
		t, err = page.Parse(string(text))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: ConfigMap %s key %s: %w", ref.Field, ref.Name, ref.Key, err)
	}
	return t, nil
}

// readPassKeys reads the keys of JWT passes, which the operator keeps in the room's Secret beside
// the HMAC key.
func readPassKeys(values SecretValues) ([]byte, error) {
	if values == nil {
		return nil, fmt.Errorf("spec.pass.format: JWT passes need the keys in Secret key %s, and there are no Secret values to read", herdgatev1alpha1.SecretPassKeys)
	}
	raw, err := values(herdgatev1alpha1.SecretPassKeys)
	if err != nil {
		return nil, fmt.Errorf("spec.pass.format: JWT passes need the keys in Secret key %s: %w", herdgatev1alpha1.SecretPassKeys, err)
	}
	return raw, nil
}

// applyEntry fills the entry's checks, the bypass lanes and the page, reading the values they refer
// to.
func (c *Config) applyEntry(hmacKey []byte, values SecretValues) error {
	s := &c.Settings
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
	if s.ReleaseKey != nil {
		key, err := read(*s.ReleaseKey)
		if err != nil {
			return err
		}
		c.releaseKey = key
	}
	if s.Entry != nil {
		limit := &entry.ClientLimit{EntryLimit: *s.Entry, Clients: c.clients}
		c.pollingClients = limit
		if s.Shadow != nil {
			limit.ShadowFactor = s.Shadow.OverLimitFactor
		}
		c.EntryChecks = append(c.EntryChecks, limit)
	}
	if inv := s.Invitation; inv != nil {
		key, err := read(inv.Key)
		if err != nil {
			return err
		}
		c.EntryChecks = append(c.EntryChecks, &entry.Invitation{Key: key, Audience: s.Namespace + "/" + s.Name, SingleUse: inv.SingleUse})
		if inv.SingleUse {
			c.invitationTokens = 1
		}
	}
	if pow := s.ProofOfWork; pow != nil {
		c.ProofOfWork = entry.NewProofOfWork(*pow, hmacKey, s.Namespace+"/"+s.Name)
		c.EntryChecks = append(c.EntryChecks, c.ProofOfWork)
	} else if ext := s.External; ext != nil {
		secret, err := read(ext.Secret)
		if err != nil {
			return err
		}
		c.EntryChecks = append(c.EntryChecks, &entry.ExternalChallenge{VerifyURL: ext.VerifyURL, Secret: string(secret), Timeout: ext.Timeout, Clients: c.clients})
	}
	if pg := s.Page; pg != nil && pg.Template != nil {
		c.PageTemplate, c.PageProblem = readPageTemplate(*pg.Template, values)
	}
	if len(s.Lanes) > 0 {
		lanes := &entry.Lanes{Audience: s.Namespace + "/" + s.Name}
		for _, l := range s.Lanes {
			lane := entry.Lane{Name: l.Name, Invitation: l.Invitation, Header: l.Header, Cookie: l.Cookie}
			var err error
			if l.Code != nil {
				if lane.CodeKey, err = read(*l.Code); err != nil {
					return err
				}
			}
			if l.Header != "" {
				if lane.HeaderValue, err = read(l.HeaderValue); err != nil {
					return err
				}
			}
			if l.Cookie != "" {
				if lane.CookieValue, err = read(l.CookieValue); err != nil {
					return err
				}
			}
			lanes.Lanes = append(lanes.Lanes, lane)
		}
		c.EntryChecks = append(c.EntryChecks, lanes)
	}
	for _, b := range s.Bypass {
		lane := &entry.BypassLane{Name: b.Name, CIDRs: b.CIDRs, Header: b.Header, Path: b.Path, Clients: c.clients}
		if b.Header != "" {
			v, err := read(b.HeaderValue)
			if err != nil {
				return err
			}
			lane.Value = v
			c.bypassHeaders = append(c.bypassHeaders, b.Header)
		}
		c.BypassLanes = append(c.BypassLanes, lane)
	}
	return nil
}
