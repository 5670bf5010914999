package settings

import (
	"regexp"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// Beacon is spec.draw.beacon: the randomness beacon a draw takes its round from.
type Beacon struct {
	// URL is the base address of its HTTP API; ChainHash names its chain, hex.
	URL, ChainHash string
	// MaxWait is how long a draw waits past the committed round's time before it falls back.
	MaxWait time.Duration
}

const (
	// DefaultBeaconMaxWait is spec.draw.beacon.maxWait when unset.
	DefaultBeaconMaxWait = time.Minute
	// MinBeaconMaxWait and MaxBeaconMaxWait bound it.
	MinBeaconMaxWait = time.Second
	MaxBeaconMaxWait = time.Hour
)

var chainHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// deriveDraw checks spec.draw and gives the schedule's opening its beacon. The draw of an event's
// launch is derived with the event's settings, with its own draw in place of the room's.
func (s *Settings) deriveDraw(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	d := spec.Draw
	if d == nil {
		return nil
	}
	beacon := d.SeedSource == herdgatev1alpha1.DrawSeedBeacon
	switch {
	case d.SeedSource != "" && d.SeedSource != herdgatev1alpha1.DrawSeedCommitReveal && !beacon:
		return fieldErr("spec.draw.seedSource", "%q is not CommitReveal or Beacon", d.SeedSource)
	case beacon != (d.Beacon != nil):
		return fieldErr("spec.draw.beacon", "beacon is set with seedSource Beacon, and only then")
	case d.Beacon == nil:
		return nil
	}
	u, err := CheckUpstreamURL(d.Beacon.URL)
	if err != nil {
		return fieldErr("spec.draw.beacon.url", "%v", err)
	}
	if !chainHash.MatchString(d.Beacon.ChainHash) {
		return fieldErr("spec.draw.beacon.chainHash", "%q is not 64 lower-case hex digits", d.Beacon.ChainHash)
	}
	b := &Beacon{URL: u.String(), ChainHash: d.Beacon.ChainHash, MaxWait: DefaultBeaconMaxWait}
	if w := d.Beacon.MaxWait; w != nil {
		if w.Duration < MinBeaconMaxWait || w.Duration > MaxBeaconMaxWait {
			return fieldErr("spec.draw.beacon.maxWait", "%s is outside %s … %s", w.Duration, MinBeaconMaxWait, MaxBeaconMaxWait)
		}
		b.MaxWait = w.Duration
	}
	if s.Schedule != nil {
		s.Schedule.Beacon = b
	}
	return nil
}
