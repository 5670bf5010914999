package settings

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

const (
	// MinLaneValue: a guessable lane header or cookie value would let anyone jump into the lane.
	MinLaneValue = 16
	// MaxLanes bounds a room's lanes, as the engine does (MaxLanes).
	MaxLanes = 8
	// MainLane names the main queue where lanes are listed; no lane may take it (MainLane).
	MainLane = "main"
)

// Lane is one spec.lanes lane: its name, its percentage of every tick's batch, and how a visitor
// joins it (any of them).
type Lane struct {
	Name    string
	Percent int
	// Code is the key of the lane's signed codes; nil when codes do not join it.
	Code *SecretRef
	// Invitation: an invitation whose lane claim names the lane joins it.
	Invitation bool
	// Header and Cookie, when set, join a request carrying them with the values their refs hold.
	Header, Cookie           string
	HeaderValue, CookieValue SecretRef
}

// cookieName is a cookie name: a token (RFC 6265) without its quote characters.
var cookieName = regexp.MustCompile(`^[-A-Za-z0-9!#$%&*+.^_|~]+$`)

// deriveLanes fills the lanes, with the checks the API's schema and CEL rules make.
func (s *Settings) deriveLanes(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	if len(spec.Lanes) > MaxLanes {
		return fieldErr("spec.lanes", "%d lanes, at most %d", len(spec.Lanes), MaxLanes)
	}
	total, seen := 0, map[string]bool{}
	for i, l := range spec.Lanes {
		field := fmt.Sprintf("spec.lanes[%d]", i)
		lane, err := deriveLane(field, l, spec)
		if err != nil {
			return err
		}
		if seen[lane.Name] {
			return fieldErr(field+".name", "%q names two lanes", lane.Name)
		}
		seen[lane.Name] = true
		total += lane.Percent
		s.Lanes = append(s.Lanes, lane)
	}
	if total > 99 {
		return fieldErr("spec.lanes", "the lanes' weightPercent add up to %d, at most 99: the main queue keeps the rest", total)
	}
	return nil
}

func deriveLane(field string, l herdgatev1alpha1.Lane, spec *herdgatev1alpha1.WaitingQueueSpec) (Lane, error) {
	if len(l.Name) > 63 || !bypassName.MatchString(l.Name) || l.Name == MainLane {
		return Lane{}, fieldErr(field+".name", "%q is not lower-case letters, digits and '-', or is %q", l.Name, MainLane)
	}
	if l.WeightPercent < 1 || l.WeightPercent > 99 {
		return Lane{}, fieldErr(field+".weightPercent", "%d, 1 to 99 expected", l.WeightPercent)
	}
	lane := Lane{Name: l.Name, Percent: int(l.WeightPercent), Invitation: l.Join.Invitation}
	j := l.Join
	if j.Code == nil && !j.Invitation && j.Header == nil && j.Cookie == nil {
		return Lane{}, fieldErr(field+".join", "at least one of code, invitation, header or cookie must be set")
	}
	if j.Invitation && (spec.Entry == nil || spec.Entry.Invitation == nil) {
		return Lane{}, fieldErr("spec.lanes", "a lane joined by invitation needs entry.invitation, whose key signs the invitations")
	}
	if c := j.Code; c != nil {
		key, err := secretRef(field+".join.code.keySecretRef", c.KeySecretRef, MinInvitationKey)
		if err != nil {
			return Lane{}, err
		}
		lane.Code = &key
	}
	if h := j.Header; h != nil {
		lower := strings.ToLower(h.Name)
		refused := len(h.Name) > MaxIdentityHeaderLength || !headerName.MatchString(h.Name)
		for _, r := range refusedBypass {
			refused = refused || lower == r
		}
		for _, p := range refusedPrefix {
			refused = refused || strings.HasPrefix(lower, p)
		}
		if refused {
			return Lane{}, fieldErr(field+".join.header.name", "%q is not a header a lane can use", h.Name)
		}
		value, err := secretRef(field+".join.header.valueSecretRef", h.ValueSecretRef, MinLaneValue)
		if err != nil {
			return Lane{}, err
		}
		lane.Header, lane.HeaderValue = http.CanonicalHeaderKey(h.Name), value
	}
	if c := j.Cookie; c != nil {
		if len(c.Name) > 128 || !cookieName.MatchString(c.Name) || strings.HasPrefix(strings.ToLower(c.Name), "herdgate_") {
			return Lane{}, fieldErr(field+".join.cookie.name", "%q is not a cookie name a lane can use", c.Name)
		}
		value, err := secretRef(field+".join.cookie.valueSecretRef", c.ValueSecretRef, MinLaneValue)
		if err != nil {
			return Lane{}, err
		}
		lane.Cookie, lane.CookieValue = c.Name, value
	}
	return lane, nil
}

// LaneNames are the lanes' names, in order.
func (s *Settings) LaneNames() []string {
	out := make([]string, len(s.Lanes))
	for i, l := range s.Lanes {
		out[i] = l.Name
	}
	return out
}

// laneRefs are the Secret keys the lanes refer to.
func (s *Settings) laneRefs() []SecretRef {
	var refs []SecretRef
	for _, l := range s.Lanes {
		if l.Code != nil {
			refs = append(refs, *l.Code)
		}
		if l.Header != "" {
			refs = append(refs, l.HeaderValue)
		}
		if l.Cookie != "" {
			refs = append(refs, l.CookieValue)
		}
	}
	return refs
}
