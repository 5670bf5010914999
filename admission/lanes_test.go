package admission_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

const (
	laneCodeKey = "the members' code key, 32 bytes or more"
	vipValue    = "gold-tier-0123456789"
)

// withLanes gives the harness's room two lanes: members (20 %, joined by signed codes) and vip
// (10 %, joined by a header the site's gateway sets).
func withLanes(wq *herdgatev1alpha1.WaitingQueue) {
	*wq = *builder.From(wq).Lanes(
		builder.LaneByCode("members", 20, "lanes", "code-key"),
		builder.LaneByHeader("vip", 10, "X-Member-Tier", "lanes", "vip"),
	).Obj()
}

var laneSecrets = map[string]map[string]string{"lanes": {"code-key": laneCodeKey, "vip": vipValue}}

func signLaneCode(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	base := jwt.MapClaims{"aud": "shop/orders", "lane": "members", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		base[k] = v
	}
	code, err := jwt.NewWithClaims(jwt.SigningMethodHS256, base).SignedString([]byte(laneCodeKey))
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// admitLanes runs one tick of the room's lanes, as its scheduler does.
func (h *harness) admitLanes(limit int) []queue.AdmittedVisitor {
	h.t.Helper()
	h.tick++
	res, err := h.q.Admit(context.Background(), queue.AdmitRequest{TickID: h.tick, Limit: limit, PassTTL: 5 * time.Minute, AbandonAfter: 5 * time.Minute,
		Lanes: []queue.LaneShare{{Name: "members", Percent: 20}, {Name: "vip", Percent: 10}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Admitted
}

// TestAVisitorJoinsALaneAndWaitsInIt: through the proxy, a code or the gateway's header puts an
// entry in its lane, whose answers say the lane, the place in it and the wait its share gives; a
// code of two uses enters two visitors and refuses a third; a code that does not verify is refused;
// the room's ticks admit from each lane, and a lane's visitor reaches the protected routes with its
// pass like anyone.
func TestAVisitorJoinsALaneAndWaitsInIt(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, withLanes)
		h.fillAhead(30) // in the main queue
		twoUses := signLaneCode(t, jwt.MapClaims{"uses": 2})
		var members []*visitor
		for i := range 3 {
			v := h.visitor()
			r := v.do(http.MethodPost, "/.herdgate/enter", nil, admission.LaneCodeHeader, twoUses)
			body := r.json(t)
			if i == 2 {
				if r.StatusCode != http.StatusConflict || body["error"] != "lane_code_used" || body["header"] != admission.LaneCodeHeader {
					t.Fatalf("a third visitor with a code of two uses: %d %v; want 409 lane_code_used", r.StatusCode, body)
				}
				continue
			}
			if r.StatusCode != http.StatusOK || body["lane"] != "members" || body["position"] != float64(i+1) || body["queueDepth"] != float64(i+1) {
				t.Fatalf("visitor %d with a members code: %d %v; want place %d in members", i+1, r.StatusCode, body, i+1)
			}
			// Members take 20 % of 14 a tick: 28 a second, so anyone of them waits at most a second.
			if body["estimatedWaitSeconds"] != float64(1) {
				t.Errorf("a members visitor's estimated wait: %v; want 1 s at 28 a second", body["estimatedWaitSeconds"])
			}
			members = append(members, v)
		}
		vip := h.visitor()
		vip.header.Set("X-Member-Tier", vipValue)
		if body := vip.enter().json(t); body["lane"] != "vip" || body["position"] != float64(1) {
			t.Fatalf("a visitor with the gateway's header: %v; want place 1 in vip", body)
		}
		plain := h.visitor()
		plain.header.Set("X-Member-Tier", "made-up")
		if body := plain.enter().json(t); body["lane"] != nil || body["position"] != float64(31) {
			t.Fatalf("a visitor with a made-up header value: %v; want place 31 in the main queue", body)
		}
		for name, code := range map[string]string{
			"expired":     signLaneCode(t, jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()}),
			"wrong_queue": signLaneCode(t, jwt.MapClaims{"aud": "shop/other"}),
			"invalid":     signLaneCode(t, jwt.MapClaims{"lane": "vip"}),
		} {
			r := h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, admission.LaneCodeHeader, code)
			if body := r.json(t); r.StatusCode != http.StatusForbidden || body["error"] != "lane_code_"+name {
				t.Errorf("a code %s: %d %v", name, r.StatusCode, body)
			}
		}
		time.Sleep(time.Second)
		if body := members[1].status().json(t); body["lane"] != "members" || body["position"] != float64(2) {
			t.Fatalf("a members visitor's poll: %v", body)
		}
		// One tick of 10: 2 from members, 1 from vip, 7 from the main queue.
		got := map[bool]int{}
		for _, a := range h.admitLanes(10) {
			got[strings.HasPrefix(a.ID, "ahead-")]++
		}
		if got[true] != 7 || got[false] != 3 {
			t.Fatalf("a tick of 10 admitted %d of the main queue and %d of the lanes; want 7 and 3", got[true], got[false])
		}
		time.Sleep(time.Second)
		if body := members[0].status().json(t); body["admitted"] != true {
			t.Fatalf("a members visitor after the tick: %v; want admitted", body)
		}
		if r := members[0].do(http.MethodPost, "/api/v1/orders", nil); r.StatusCode != http.StatusOK {
			t.Fatalf("a members visitor's order with its pass: %d", r.StatusCode)
		}
	})
}

// TestALaneThroughGateways: behind each gateway the guide configures, a lane's code reaches
// herdgate's enter, the visitor waits in its lane, and once admitted reaches the protected route.
func TestALaneThroughGateways(t *testing.T) {
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) {
			h, gateway := throughGateway(t, gw, withLanes, laneSecrets)
			h.fillAhead(5)
			jar, _ := cookiejar.New(nil)
			client := &http.Client{Jar: jar}
			do := func(method, path string, kv ...string) (int, string) {
				t.Helper()
				req, _ := http.NewRequest(method, gateway+path, nil)
				for i := 0; i+1 < len(kv); i += 2 {
					req.Header.Set(kv[i], kv[i+1])
				}
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				body, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(body)
			}
			code, body := do(http.MethodPost, "/.herdgate/enter", admission.LaneCodeHeader, signLaneCode(t, nil))
			if code != http.StatusOK || !strings.Contains(body, `"lane":"members"`) || !strings.Contains(body, `"position":1,`) {
				t.Fatalf("entering with a members code through %s: %d %s", name, code, body)
			}
			h.admitLanes(10)
			for deadline := time.Now().Add(10 * time.Second); ; {
				time.Sleep(600 * time.Millisecond)
				if _, body = do(http.MethodGet, "/.herdgate/status"); strings.Contains(body, `"admitted":true`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the members visitor was never admitted: %s", body)
				}
			}
			if code, body = do(http.MethodPost, "/api/v1/orders"); code != http.StatusOK {
				t.Fatalf("the members visitor's order through %s: %d %s", name, code, body)
			}
		})
	}
}

// TestALaneVisitorGetsBackItsLanePlace: a lane's visitor holds a place that names its lane; after a
// failover took the place and the sequence back, its next poll brings the place, and it waits in
// its lane where it was. The place is no main-queue place: it never answers from the far path.
func TestALaneVisitorGetsBackItsLanePlace(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, withLanes)
	h.fillAhead(3)
	first, lost := h.visitor(), h.visitor()
	for _, v := range []*visitor{first, lost} {
		v.header.Set("X-Member-Tier", vipValue)
	}
	first.enter()
	res := lost.enter()
	body := res.json(t)
	place, _ := body["place"].(string)
	if res.StatusCode != http.StatusOK || body["lane"] != "vip" || body["position"] != 2.0 || !strings.Contains(place, ".vip.") {
		t.Fatalf("a vip visitor's enter: %d %s, want place 2 in vip, with a place naming the lane", res.StatusCode, res.body)
	}
	prefix := h.q.KeyPrefix()
	h.loseLastPlace(prefix+":q:vip", 4)

	time.Sleep(600 * time.Millisecond) // the poll interval
	lost.header.Del("X-Member-Tier")
	res = lost.status()
	if body := res.json(t); res.StatusCode != http.StatusOK || body["lane"] != "vip" || body["position"] != 2.0 || body["queueDepth"] != 2.0 {
		t.Fatalf("the lost vip visitor's poll: %d %s, want its place, 2 of 2 in vip", res.StatusCode, res.body)
	}
	if n := h.metric("herdgate_proxy_requests_total", `route_class="status",outcome="restored"`); n != 1 {
		t.Fatalf("restored polls counted %v, want 1", n)
	}
	if n, err := h.redisClient().ZCard(t.Context(), prefix+":q").Result(); err != nil || n != 3 {
		t.Fatalf("the main queue holds %d (%v), want the 3 ahead only", n, err)
	}
}

// TestAPreQueueVisitorIsToldItsLane: before a scheduled opening a visitor who joins a lane takes a
// pre-queue place like anyone, and its answers name the lane the draw will place it in, on entering
// and on coming back; a visitor of the main queue is told no lane.
func TestAPreQueueVisitorIsToldItsLane(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, func(wq *herdgatev1alpha1.WaitingQueue) {
		withLanes(wq)
		*wq = *builder.From(wq).Schedule(time.Now().Add(-time.Minute), time.Now().Add(time.Hour), time.Time{}).Obj()
	})
	h.room.ReadPlansFresh(h.q)
	h.publishPhase(phase.PreQueue)
	vip, plain := h.visitor(), h.visitor()
	vip.header.Set("X-Member-Tier", vipValue)
	for i, c := range []struct {
		who  string
		v    *visitor
		lane any
	}{{"a vip", vip, "vip"}, {"a main-queue visitor", plain, nil}} {
		for _, when := range []string{"entering", "coming back"} {
			res := c.v.enter()
			body := res.json(t)
			if res.StatusCode != http.StatusOK || body["phase"] != string(phase.PreQueue) || body["arrival"] != float64(i+1) {
				t.Fatalf("%s %s in the pre-queue: %d %s; want its pre-queue place %d", c.who, when, res.StatusCode, res.body, i+1)
			}
			if body["lane"] != c.lane {
				t.Errorf("%s %s in the pre-queue: lane %v, want %v", c.who, when, body["lane"], c.lane)
			}
		}
	}
}

// TestALaneCookieCountsOnlyWhenCarriedOnce: a lane joined by cookie takes an entry that carries the
// cookie exactly once with exactly the Secret's value (docs/guides/entry-control.md, lanes); the
// cookie twice, in one Cookie header or in two, or beside a forged copy, leaves the entry in the main
// queue, on both fronts.
func TestALaneCookieCountsOnlyWhenCarriedOnce(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, func(wq *herdgatev1alpha1.WaitingQueue) {
			*wq = *builder.From(wq).Lanes(builder.LaneByCookie("club", 10, "member", "lanes", "vip")).Obj()
		})
		enter := func(cookieLines ...string) map[string]any {
			t.Helper()
			v := h.visitor()
			v.header["Cookie"] = cookieLines
			r := v.enter()
			if r.StatusCode != http.StatusOK {
				t.Fatalf("enter with Cookie %q: %d %s", cookieLines, r.StatusCode, r.body)
			}
			return r.json(t)
		}
		if body := enter("member=" + vipValue); body["lane"] != "club" {
			t.Fatalf("the lane's cookie once: %v; want the club lane", body)
		}
		for name, lines := range map[string][]string{
			"twice in one header":    {"member=" + vipValue + "; member=" + vipValue},
			"once in each of two":    {"member=" + vipValue, "member=" + vipValue},
			"beside a forged copy":   {"member=" + vipValue + "; member=forged-0123456789abcdef"},
			"after a forged copy":    {"member=forged-0123456789abcdef; member=" + vipValue},
			"with another's value":   {"member=forged-0123456789abcdef"},
			"under another cookie's": {"other=" + vipValue},
		} {
			if body := enter(lines...); body["lane"] != nil {
				t.Errorf("the lane's cookie %s (%q): %v; want the main queue", name, lines, body)
			}
		}
	})
}
