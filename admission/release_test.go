package admission_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

const releaseKey = "the workload's release key"

// TestTheWorkloadReleasesBySessionHandle: with a release key, a request with a valid pass reaches
// the workload with its session's handle (never a visitor's own), and the workload's own server ends
// the session with it: the same pass is refused from then on. Without the key, a wrong handle or a
// missing one, nothing is released, and each answer says why.
func TestTheWorkloadReleasesBySessionHandle(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{secrets: map[string]map[string]string{"orders-release": {"key": releaseKey}}},
			func(wq *herdgatev1alpha1.WaitingQueue) {
				*wq = *builder.From(wq).ReleaseKey("orders-release", "key").Obj()
			})
		v := h.visitor()
		token := h.admitted(v)
		if r := v.do(http.MethodPost, "/api/v1/orders", nil, admission.SessionHeader, "forged-by-the-visitor"); r.StatusCode != http.StatusOK {
			t.Fatalf("order with the pass: %d %s", r.StatusCode, r.body)
		}
		calls := h.upstream.all()
		handle := calls[len(calls)-1].Header.Get(admission.SessionHeader)
		if handle == "" || handle == "forged-by-the-visitor" || strings.Contains(handle, token) {
			t.Fatalf("the workload got the session handle %q", handle)
		}

		release := func(header ...string) response {
			return h.visitor().do(http.MethodPost, "/.herdgate/release", nil, header...)
		}
		for name, c := range map[string]struct {
			header []string
			status int
			code   string
		}{
			"no key":          {[]string{admission.SessionHeader, handle}, http.StatusUnauthorized, "unauthorized"},
			"a wrong key":     {[]string{"Authorization", "Bearer guess", admission.SessionHeader, handle}, http.StatusUnauthorized, "unauthorized"},
			"no handle":       {[]string{"Authorization", "Bearer " + releaseKey}, http.StatusBadRequest, "bad_request"},
			"a forged one":    {[]string{"Authorization", "Bearer " + releaseKey, admission.SessionHeader, "AAAA." + strings.SplitN(handle, ".", 2)[1]}, http.StatusUnprocessableEntity, "bad_session"},
			"the pass as one": {[]string{"Authorization", "Bearer " + releaseKey, admission.SessionHeader, token}, http.StatusUnprocessableEntity, "bad_session"},
		} {
			if r := release(c.header...); r.StatusCode != c.status || r.json(t)["error"] != c.code {
				t.Errorf("%s: %d %s; want %d %s", name, r.StatusCode, r.body, c.status, c.code)
			}
		}
		if r := v.do(http.MethodPost, "/api/v1/orders", nil); r.StatusCode != http.StatusOK {
			t.Fatalf("nothing was released yet, but the pass is refused: %d %s", r.StatusCode, r.body)
		}
		if r := release("Authorization", "Bearer "+releaseKey, admission.SessionHeader, handle); r.StatusCode != http.StatusOK || r.json(t)["released"] != true {
			t.Fatalf("release: %d %s", r.StatusCode, r.body)
		}
		r := v.do(http.MethodPost, "/api/v1/orders", nil)
		if r.StatusCode != http.StatusForbidden || r.Header.Get("X-Herdgate-Pass-Result") != "released" {
			t.Fatalf("the released pass: %d %q %s", r.StatusCode, r.Header.Get("X-Herdgate-Pass-Result"), r.body)
		}
		if r := v.do(http.MethodGet, "/.herdgate/release", nil); r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET /.herdgate/release: %d", r.StatusCode)
		}
	})
}

// TestNoSessionHandleWithoutAReleaseKey: a queue without a release key hands the workload no handle,
// passes none a visitor sends, and answers the endpoint 404.
func TestNoSessionHandleWithoutAReleaseKey(t *testing.T) {
	h := newHarness(t, nil)
	v := h.visitor()
	h.admitted(v)
	if r := v.do(http.MethodPost, "/api/v1/orders", nil, admission.SessionHeader, "forged-by-the-visitor"); r.StatusCode != http.StatusOK {
		t.Fatalf("order: %d %s", r.StatusCode, r.body)
	}
	for _, c := range h.upstream.all() {
		if got := c.Header.Get(admission.SessionHeader); got != "" {
			t.Fatalf("the workload got a session handle %q", got)
		}
	}
	if r := v.do(http.MethodPost, "/.herdgate/release", nil, "Authorization", "Bearer x"); r.StatusCode != http.StatusNotFound || r.json(t)["error"] != "no_release_key" {
		t.Errorf("release without a key: %d %s", r.StatusCode, r.body)
	}
}

// TestAReleaseTellsTheGatewayRoomWhatTheWorkloadHeld: in Gateway mode, where no answer of the
// workload passes herdgate, a release may tell how long the workload held the request and whether
// it failed; the replica counts it for the room's Adaptive capacity. A malformed telling is refused,
// naming its header, and releases nothing; in Proxy mode, where the proxy measured the request
// itself, a telling is not counted again.
func TestAReleaseTellsTheGatewayRoomWhatTheWorkloadHeld(t *testing.T) {
	for _, enforcement := range []herdgatev1alpha1.Enforcement{herdgatev1alpha1.EnforcementGateway, herdgatev1alpha1.EnforcementProxy} {
		t.Run(string(enforcement), func(t *testing.T) {
			h := newHarnessWith(t, harnessOptions{memory: true, secrets: map[string]map[string]string{"orders-release": {"key": releaseKey}}},
				func(wq *herdgatev1alpha1.WaitingQueue) {
					*wq = *builder.From(wq).Enforcement(enforcement).Adaptive(0).ReleaseKey("orders-release", "key").Obj()
				})
			now := time.Now()
			token := h.room.Config().Passes.Issue("ada", now, now.Add(time.Minute))
			// The handle, as the workload gets it: from the check's allow, or with the forwarded request.
			var handle string
			if enforcement == herdgatev1alpha1.EnforcementGateway {
				handle = h.visitor().do(http.MethodGet, "/.herdgate/check", nil, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/v1/orders",
					admission.PassHeader, token).Header.Get(admission.SessionHeader)
			} else if r := h.visitor().do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, token); r.StatusCode == http.StatusOK {
				handle = h.upstream.all()[0].Header.Get(admission.SessionHeader)
			}
			if handle == "" {
				t.Fatal("the workload got no session handle")
			}
			release := func(header ...string) response {
				return h.visitor().do(http.MethodPost, "/.herdgate/release", nil, append([]string{"Authorization", "Bearer " + releaseKey, admission.SessionHeader, handle}, header...)...)
			}
			for _, bad := range [][]string{
				{admission.HeldHeader, "soon"}, {admission.HeldHeader, "-1"}, {admission.HeldHeader, "600001"},
				{admission.HeldHeader, "200", admission.HeldFailedHeader, "maybe"}, {admission.HeldFailedHeader, "true"},
			} {
				if r := release(bad...); r.StatusCode != http.StatusBadRequest || r.json(t)["header"] != bad[len(bad)-2] {
					t.Errorf("a release telling %q: %d %s; want 400 naming %s", bad, r.StatusCode, r.body, bad[len(bad)-2])
				}
			}
			if enforcement == herdgatev1alpha1.EnforcementGateway {
				if r := h.visitor().do(http.MethodGet, "/.herdgate/check", nil, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/v1/orders",
					admission.PassHeader, token); r.StatusCode != http.StatusOK {
					t.Fatalf("after the refused releases the pass is refused: %d %s", r.StatusCode, r.body)
				}
			}
			if r := release(admission.HeldHeader, "180", admission.HeldFailedHeader, "true"); r.StatusCode != http.StatusOK {
				t.Fatalf("a release telling 180 ms: %d %s", r.StatusCode, r.body)
			}
			r, _ := h.room.WorkloadMeter().Take(time.Now())
			switch {
			case enforcement == herdgatev1alpha1.EnforcementGateway && (r.Requests != 1 || r.Errors != 1 || r.LatencyMicros != 180_000 || r.FlightMicros != 180_000):
				t.Errorf("the replica counted %+v; want the one failed request of 180 ms the workload told of", r)
			case enforcement == herdgatev1alpha1.EnforcementProxy && (r.Requests != 1 || r.Errors != 0 || r.LatencyMicros >= 180_000):
				t.Errorf("the replica counted %+v; want only the request it forwarded", r)
			}
		})
	}
}
