package entry

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const laneKey = "0123456789abcdef0123456789abcdef"

func laneCode(t *testing.T, key string, claims jwt.MapClaims) string {
	t.Helper()
	code, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestLanesChooseTheLane: a header or cookie with the lane's value, the lane an invitation claims,
// and a code signed for a lane put the entry in that lane, the first of the spec's order first; a
// code that does not verify is refused, and the use of a counted code goes to the engine.
func TestLanesChooseTheLane(t *testing.T) {
	lanes := &Lanes{Audience: "shop/orders", Lanes: []Lane{
		{Name: "vip", Header: "X-Member-Tier", HeaderValue: []byte("gold-0123456789ab")},
		{Name: "members", Cookie: "member", CookieValue: []byte("m-0123456789abcdef"), Invitation: true, CodeKey: []byte(laneKey)},
		{Name: "presale", CodeKey: []byte("another-key-0123456789abcdef0123")},
	}}
	exp := now.Add(time.Hour).Unix()
	code := func(lane string, extra jwt.MapClaims) string {
		c := jwt.MapClaims{"aud": "shop/orders", "lane": lane, "exp": exp}
		for k, v := range extra {
			c[k] = v
		}
		key := laneKey
		if lane == "presale" {
			key = "another-key-0123456789abcdef0123"
		}
		return laneCode(t, key, c)
	}
	for _, c := range []struct {
		name           string
		r              request
		invitationLane string
		lane, refusal  string
		uses           int
	}{
		{"nothing", newRequest("203.0.113.7"), "", "", "", 0},
		{"the header", newRequest("203.0.113.7", "X-Member-Tier", "gold-0123456789ab"), "", "vip", "", 0},
		{"the header with another value", newRequest("203.0.113.7", "X-Member-Tier", "silver"), "", "", "", 0},
		{"the header twice", newRequest("203.0.113.7", "X-Member-Tier", "gold-0123456789ab", "X-Member-Tier", "gold-0123456789ab"), "", "", "", 0},
		{"the cookie", newRequest("203.0.113.7", "Cookie", "theme=dark; member=m-0123456789abcdef"), "", "members", "", 0},
		{"the invitation's lane", newRequest("203.0.113.7"), "members", "members", "", 0},
		{"an invitation naming a lane it does not join", newRequest("203.0.113.7"), "presale", "", "", 0},
		{"a code", newRequest("203.0.113.7", LaneCodeHeader, code("presale", nil)), "", "presale", "", 0},
		{"a code of three uses", newRequest("203.0.113.7", LaneCodeHeader, code("members", jwt.MapClaims{"uses": 3})), "", "members", "", 3},
		{"a single-use code", newRequest("203.0.113.7", LaneCodeHeader, code("members", jwt.MapClaims{"uses": 1})), "", "members", "", 1},
		{"a header before a code of a later lane", newRequest("203.0.113.7", "X-Member-Tier", "gold-0123456789ab", LaneCodeHeader, code("presale", nil)), "", "vip", "", 0},
		{"an expired code", newRequest("203.0.113.7", LaneCodeHeader, laneCode(t, laneKey, jwt.MapClaims{"aud": "shop/orders", "lane": "members", "exp": now.Add(-time.Minute).Unix()})), "", "", "lane_code_expired", 0},
		{"a code without expiry", newRequest("203.0.113.7", LaneCodeHeader, laneCode(t, laneKey, jwt.MapClaims{"aud": "shop/orders", "lane": "members"})), "", "", "lane_code_invalid", 0},
		{"another room's code", newRequest("203.0.113.7", LaneCodeHeader, laneCode(t, laneKey, jwt.MapClaims{"aud": "shop/other", "lane": "members", "exp": exp})), "", "", "lane_code_wrong_queue", 0},
		{"a code signed with another lane's key", newRequest("203.0.113.7", LaneCodeHeader, laneCode(t, laneKey, jwt.MapClaims{"aud": "shop/orders", "lane": "presale", "exp": exp})), "", "", "lane_code_invalid", 0},
		{"a code for a lane codes do not join", newRequest("203.0.113.7", LaneCodeHeader, laneCode(t, laneKey, jwt.MapClaims{"aud": "shop/orders", "lane": "vip", "exp": exp})), "", "", "lane_code_invalid", 0},
		{"a code of negative uses", newRequest("203.0.113.7", LaneCodeHeader, code("members", jwt.MapClaims{"uses": -1})), "", "", "lane_code_invalid", 0},
		{"a code that is no JWT", newRequest("203.0.113.7", LaneCodeHeader, "members"), "", "", "lane_code_invalid", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Outcome{InvitationLane: c.invitationLane}
			refused := lanes.Check(input(c.r), &out)
			wantRefusal(t, c.name, refused, http.StatusForbidden, c.refusal)
			if out.Limit.Lane != c.lane {
				t.Fatalf("lane %q, want %q", out.Limit.Lane, c.lane)
			}
			switch {
			case c.uses == 0 && (len(out.Limit.SingleUse) != 0 || out.LaneCode != 0):
				t.Fatalf("a code of any number of uses binds %v", out.Limit.SingleUse)
			case c.uses > 0 && (out.LaneCode != 1 || len(out.Limit.SingleUse) != 1 || out.Limit.SingleUse[0].Uses != c.uses):
				t.Fatalf("a code of %d uses: %+v (LaneCode %d)", c.uses, out.Limit.SingleUse, out.LaneCode)
			}
		})
	}
}

// TestAnInvitationNamesItsLane: the invitation's lane claim reaches the lanes' check.
func TestAnInvitationNamesItsLane(t *testing.T) {
	inv := &Invitation{Key: []byte(inviteKey), Audience: "shop/orders"}
	lanes := &Lanes{Audience: "shop/orders", Lanes: []Lane{{Name: "members", Invitation: true}}}
	token := invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "ada", "exp": now.Add(time.Hour).Unix(), "lane": "members"})
	var out Outcome
	if r := (Chain{inv, lanes}).Check(input(newRequest("203.0.113.7", InvitationHeader, token)), &out); r != nil || out.Limit.Lane != "members" {
		t.Fatalf("an invitation naming members: %+v, lane %q", r, out.Limit.Lane)
	}
	plain := invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "bea", "exp": now.Add(time.Hour).Unix()})
	out = Outcome{}
	if r := (Chain{inv, lanes}).Check(input(newRequest("203.0.113.7", InvitationHeader, plain)), &out); r != nil || out.Limit.Lane != "" {
		t.Fatalf("an invitation naming no lane: %+v, lane %q", r, out.Limit.Lane)
	}
}
