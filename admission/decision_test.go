package admission_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// readOnly is a request the gate reads; it fails the test if the gate writes to it, since the gate
// returns its answer in the Decision.
type readOnly struct {
	admission.Exchange
	t *testing.T
}

func (r readOnly) SetHeader(name, _ string) {
	r.t.Errorf("the gate wrote header %s to the request", name)
}
func (r readOnly) SetCookie(c *http.Cookie) {
	r.t.Errorf("the gate wrote cookie %s to the request", c.Name)
}
func (r readOnly) Reply(status int, _ string, _ []byte) {
	r.t.Errorf("the gate answered %d through the request", status)
}

// TestTheGateReturnsItsDecisionAsAValue: every request ends in one of three verdicts, and the gate
// writes nothing to the request it reads. A refusal carries its answer; a forward carries what the
// gate adds to the upstream's answer; herdgate's own paths are Reserved, for the room's endpoints.
func TestTheGateReturnsItsDecisionAsAValue(t *testing.T) {
	room, engine, _, cfg := gateFor(t, func(b *builder.QueueBuilder) { b.Identity("X-User-Id") })
	now := time.Now()
	token := cfg.Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))
	engine.SetPosition("bea", queue.Position{State: queue.Admitted, Now: now, Pass: queue.Pass{NotBefore: now.Add(-time.Second), Expiry: now.Add(time.Minute)}})
	type got struct {
		Verdict  admission.Verdict
		Status   int
		Location string
		Result   string
		Cookies  int
	}
	for _, c := range []struct {
		name, method, target string
		header               map[string]string
		want                 got
	}{
		{"a valid pass", "POST", "/api/v1/orders", map[string]string{"X-User-Id": "ada", admission.PassHeader: token}, got{Verdict: admission.Forward}},
		{"an open route", "GET", "/about", nil, got{Verdict: admission.Forward}},
		{"no pass", "POST", "/api/v1/orders", map[string]string{"X-User-Id": "cy"}, got{Verdict: admission.Answer, Status: 403, Result: "missing"}},
		{"no identity", "POST", "/api/v1/orders", nil, got{Verdict: admission.Answer, Status: 401}},
		{"a browser", "GET", "/checkout", map[string]string{"X-User-Id": "cy", "Accept": "text/html"},
			got{Verdict: admission.Answer, Status: 303, Location: "/.herdgate/?return=%2Fcheckout", Result: "missing"}},
		{"a browser admitted at once", "GET", "/checkout", map[string]string{"X-User-Id": "bea", "Accept": "text/html"},
			got{Verdict: admission.Forward, Cookies: 1}},
		{"CONNECT", "CONNECT", "/api/v1/orders", nil, got{Verdict: admission.Answer, Status: 405}},
		{"a path that does not normalise", "GET", "/orders%zz", nil, got{Verdict: admission.Answer, Status: 400}},
		{"enter", "POST", "/.herdgate/enter", nil, got{Verdict: admission.Reserved}},
		{"the page", "GET", "/.herdgate", nil, got{Verdict: admission.Reserved}},
		{"a reserved path spelt otherwise", "GET", "/x/../.herdgate/status", nil, got{Verdict: admission.Reserved}},
		// What every request must be is checked before either role takes it: herdgate's own paths too.
		{"CONNECT to herdgate's own path", "CONNECT", "/.herdgate/status", nil, got{Verdict: admission.Answer, Status: 405}},
		{"herdgate's own path that does not normalise", "GET", "/.herdgate/%zz", nil, got{Verdict: admission.Answer, Status: 400}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://shop.example/", nil)
			r.Method = c.method
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			d := room.Decide(readOnly{admissiontest.NewRequest(r), t}, c.target, false)
			reply := d.Reply()
			g := got{Verdict: d.Verdict(), Status: reply.Status, Location: reply.Header.Get("Location"),
				Result: reply.Header.Get("X-Herdgate-Pass-Result"), Cookies: len(reply.Cookies)}
			if diff := cmp.Diff(c.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if g.Verdict == admission.Answer && (reply.ContentType == "" || len(reply.Body) == 0) {
				t.Errorf("an answer without a body: %q %q", reply.ContentType, reply.Body)
			}
		})
	}
	enter := httptest.NewRequest(http.MethodPost, "http://shop.example/.herdgate/enter", nil)
	enter.Header.Add("X-User-Id", "ada")
	enter.Header.Add("X-User-Id", "bea")
	if d := room.Decide(readOnly{admissiontest.NewRequest(enter), t}, "/.herdgate/enter", false); d.Verdict() != admission.Answer || d.Reply().Status != http.StatusBadRequest {
		t.Errorf("an entry with two identities: verdict %d, %d; want a 400 before the visitor API", d.Verdict(), d.Reply().Status)
	}
	status := httptest.NewRequest(http.MethodGet, "http://shop.example/.herdgate/status", nil)
	if d := room.Decide(readOnly{admissiontest.NewRequest(status), t}, "/.herdgate/status", true); d.Verdict() != admission.Answer || d.Reply().Status != http.StatusBadRequest {
		t.Errorf("herdgate's own path with a fragment: verdict %d, %d; want a 400", d.Verdict(), d.Reply().Status)
	}
	unconfigured, _ := admissiontest.NewRoom("shop/orders", nil, admission.Options{})
	r := httptest.NewRequest(http.MethodGet, "http://shop.example/checkout", nil)
	if d := unconfigured.Decide(readOnly{admissiontest.NewRequest(r), t}, "/checkout", false); d.Verdict() != admission.Answer || d.Reply().Status != http.StatusServiceUnavailable {
		t.Errorf("a room without a config: verdict %d, %d; want its 503", d.Verdict(), d.Reply().Status)
	}
	if d := unconfigured.Decide(readOnly{admissiontest.NewRequest(r), t}, "/.herdgate/healthz", false); d.Verdict() != admission.Reserved {
		t.Errorf("a room without a config, its probe: verdict %d; want Reserved, which answers for itself", d.Verdict())
	}
}

// TestARefusalIsNeverAnAllow: whatever the gate wrote for a request it did not let through (nothing,
// or a 2xx), its answer is a refusal, so that no front and no gateway's check takes it for an allow.
func TestARefusalIsNeverAnAllow(t *testing.T) {
	for written, want := range map[int]int{0: http.StatusServiceUnavailable, http.StatusOK: http.StatusInternalServerError,
		http.StatusNoContent: http.StatusInternalServerError, http.StatusForbidden: http.StatusForbidden, http.StatusSeeOther: http.StatusSeeOther} {
		got := admission.MustRefuse(admission.Reply{Status: written, ContentType: "application/json", Body: []byte("{}\n")})
		if got.Status != want || len(got.Body) == 0 {
			t.Errorf("the gate wrote %d: its answer is %d %q, want %d with a body", written, got.Status, got.Body, want)
		}
	}
}
