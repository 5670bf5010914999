package pass

import (
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// TestAPassNamesTheVisitorsTheQueueTakes: the longest visitor a pass names is the queue's longest
// visitor ID.
func TestAPassNamesTheVisitorsTheQueueTakes(t *testing.T) {
	if MaxVisitorLength != queue.MaxVisitorIDLength {
		t.Fatalf("MaxVisitorLength %d, queue.MaxVisitorIDLength %d: a pass must name every visitor the queue takes, and no longer", MaxVisitorLength, queue.MaxVisitorIDLength)
	}
}

// TestPlaces: a place verifies for its visitor only, in its queue only, and nothing altered or
// forged verifies; nor does a pass or a visitor cookie taken for one.
func TestPlaces(t *testing.T) {
	key := make([]byte, 32)
	s, err := NewSigner("uid-a", key)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSigner("uid-b", key)
	token := s.Place("ada", 123456789)
	if seq, ok := s.VerifyPlace(token, "ada"); !ok || seq != 123456789 {
		t.Fatalf("VerifyPlace(%q) = %d, %v", token, seq, ok)
	}
	_, cookie := s.NewVisitorCookie()
	for name, bad := range map[string]struct{ token, visitor string }{
		"another visitor":  {token, "bea"},
		"another queue":    {other.Place("ada", 123456789), "ada"},
		"another sequence": {"123456788" + token[9:], "ada"},
		"a leading zero":   {"0" + token, "ada"},
		"a negative":       {"-1" + token[9:], "ada"},
		"no MAC":           {"123456789.", "ada"},
		"a visitor cookie": {cookie, "ada"},
		"a pass":           {s.Issue("ada", time.Now(), time.Now().Add(time.Minute)), "ada"},
		"empty":            {"", "ada"},
		"a MAC cut short":  {token[:len(token)-1], "ada"},
		"a huge sequence":  {"99999999999999999999" + token[9:], "ada"},
	} {
		if seq, ok := s.VerifyPlace(bad.token, bad.visitor); ok {
			t.Errorf("%s: %q verified as sequence %d", name, bad.token, seq)
		}
	}
}

// TestLanePlaces: a lane's place verifies, with its lane, for its visitor only, in its queue only;
// it is no main-queue place, a main-queue place holds no lane, and nothing altered verifies.
func TestLanePlaces(t *testing.T) {
	s, _ := NewSigner("uid-a", make([]byte, 32))
	other, _ := NewSigner("uid-b", make([]byte, 32))
	token := s.LanePlace("ada", "members", 4321)
	if seq, lane, ok := s.VerifyHeldPlace(token, "ada"); !ok || seq != 4321 || lane != "members" {
		t.Fatalf("VerifyHeldPlace(%q) = %d, %q, %v", token, seq, lane, ok)
	}
	if seq, lane, ok := s.VerifyHeldPlace(s.Place("ada", 4321), "ada"); !ok || seq != 4321 || lane != "" {
		t.Fatalf("VerifyHeldPlace of a main-queue place = %d, %q, %v", seq, lane, ok)
	}
	if seq, ok := s.VerifyPlace(token, "ada"); ok {
		t.Fatalf("a lane's place verified as a main-queue place at %d", seq)
	}
	mac := token[len("4321.members"):]
	for name, bad := range map[string]struct{ token, visitor string }{
		"another visitor":    {token, "bea"},
		"another queue":      {other.LanePlace("ada", "members", 4321), "ada"},
		"another lane":       {"4321.presale" + mac, "ada"},
		"another sequence":   {"4322.members" + mac, "ada"},
		"an empty lane":      {"4321." + mac, "ada"},
		"a lane in capital":  {"4321.Members" + mac, "ada"},
		"a dotted lane":      {"4321.mem.bers" + mac, "ada"},
		"a leading zero":     {"04321.members" + mac, "ada"},
		"no MAC":             {"4321.members.", "ada"},
		"a MAC cut short":    {token[:len(token)-1], "ada"},
		"a main place's MAC": {"4321.members" + s.Place("ada", 4321)[4:], "ada"},
		"a long lane":        {"4321." + strings.Repeat("a", 64) + mac, "ada"},
	} {
		if seq, lane, ok := s.VerifyHeldPlace(bad.token, bad.visitor); ok {
			t.Errorf("%s: %q verified as %d in %q", name, bad.token, seq, lane)
		}
	}
}

// TestSessionHandles: a session handle names its pass for the queue that signed it, and opens
// nothing: it is no pass, and a pass or another queue's handle is no handle.
func TestSessionHandles(t *testing.T) {
	s, _ := NewSigner("uid-a", make([]byte, 32))
	other, _ := NewSigner("uid-b", make([]byte, 32))
	now := time.UnixMilli(time.Now().UnixMilli())
	p := Pass{Visitor: "ada", NotBefore: now, Expiry: now.Add(time.Minute)}
	h := s.Session(p)
	if got, ok := s.VerifySession(h); !ok || got != p {
		t.Fatalf("VerifySession = %+v, %v; want %+v", got, ok, p)
	}
	if _, r := s.Verify(h, "ada", now); r == Valid {
		t.Fatal("a session handle verifies as a pass")
	}
	for name, bad := range map[string]string{
		"another queue's": other.Session(p),
		"a pass":          s.Issue("ada", now, now.Add(time.Minute)),
		"of another pass": strings.SplitN(s.Session(Pass{Visitor: "bea", NotBefore: now, Expiry: now.Add(time.Minute)}), ".", 2)[0] + "." + strings.SplitN(h, ".", 2)[1],
		"no MAC":          strings.SplitN(h, ".", 2)[0] + ".",
		"empty":           "",
	} {
		if _, ok := s.VerifySession(bad); ok {
			t.Errorf("%s handle verifies", name)
		}
	}
}

func TestAToldWaitVerifiesForItsVisitorOnly(t *testing.T) {
	s, err := NewSigner("uid-a", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	told := Told{Seq: 7, Entered: time.UnixMilli(1_800_000_000_123), Wait: 42_500 * time.Millisecond}
	token := s.Estimate("v1", told)
	if got, ok := s.VerifyEstimate(token, "v1"); !ok || got.Seq != 7 || !got.Entered.Equal(told.Entered) || got.Wait != told.Wait {
		t.Fatalf("VerifyEstimate = %+v, %v; want %+v", got, ok, told)
	}
	other, _ := NewSigner("uid-b", make([]byte, 32))
	for name, bad := range map[string]func() (Told, bool){
		"another visitor":       func() (Told, bool) { return s.VerifyEstimate(token, "v2") },
		"another queue":         func() (Told, bool) { return other.VerifyEstimate(token, "v1") },
		"a longer wait":         func() (Told, bool) { return s.VerifyEstimate(strings.Replace(token, ".42500.", ".42501.", 1), "v1") },
		"a place token":         func() (Told, bool) { return s.VerifyEstimate(s.Place("v1", 7), "v1") },
		"nothing":               func() (Told, bool) { return s.VerifyEstimate("", "v1") },
		"a leading zero":        func() (Told, bool) { return s.VerifyEstimate("0"+token, "v1") },
		"a mac that is not one": func() (Told, bool) { return s.VerifyEstimate(token[:len(token)-1]+"!", "v1") },
	} {
		if got, ok := bad(); ok {
			t.Errorf("%s verified: %+v", name, got)
		}
	}
}
