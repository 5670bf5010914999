package admission_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestRoomsSharingAHostTakeTheMostSpecificRoute serves three rooms of one shared set on one host,
// each protecting a deeper path than the last: every request goes to the room with the most specific
// route for it (an exact path before a prefix, a route for the method before one for another), open
// paths go to the room created first, herdgate's own paths go to the room their room or return
// parameter names, each room's cookies carry its own name, and a pass of one room opens none of the
// others'. A fourth room protecting a route another room holds is refused and changes nothing.
func TestRoomsSharingAHostTakeTheMostSpecificRoute(t *testing.T) {
	onBothFronts(t, testRoomsSharingAHost)
}

func testRoomsSharingAHost(t *testing.T) {
	redis := testenv.StartRedis(t)
	rdb, err := queue.NewClient(redis.URL(), queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store := queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	up := httptest.NewServer(&recorder{})
	t.Cleanup(up.Close)

	const host = "events.example"
	set := admission.NewSet(logr.Discard())
	created := time.Now().Add(-time.Hour)
	room := func(name string, routes ...herdgatev1alpha1.ProtectedRoute) *herdgatev1alpha1.WaitingQueue {
		return builder.Queue("shop", name).UID(types.UID("uid-"+name)).UpstreamURL(up.URL+"/"+name).Routes(routes...).
			PageMessage("notice of "+name).Shared("pool", host).Generation(3).Obj()
	}
	rooms := []*herdgatev1alpha1.WaitingQueue{
		room("tickets", builder.Route("/tickets", true, "GET", "POST")),
		room("sale", builder.Route("/tickets/sale", true, "GET", "POST")),
		room("vip", builder.Route("/tickets/sale/vip", false, "GET")),
	}
	for i, wq := range rooms {
		addRoom(t, set, store, wq, []byte(strings.Repeat(string(rune('a'+i)), 32)), created.Add(time.Duration(i)*time.Minute))
		q, err := store.Queue("shop", wq.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.PublishPlan(context.Background(), queue.PublishedPlan{Quota: mustQuota(14), PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	base := serveFront(t, set).URL
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ask := func(method, path string, header ...string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Accept", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body), res.Header
	}
	// A refusal names the room that gave it: its enter link carries the room's ID.
	refusedBy := func(method, path string) string {
		t.Helper()
		code, body, _ := ask(method, path)
		var b struct{ Enter string }
		if code != http.StatusForbidden || json.Unmarshal([]byte(body), &b) != nil {
			t.Fatalf("%s %s without a pass: %d %s; want 403", method, path, code, body)
		}
		for _, wq := range rooms {
			if b.Enter == "/.herdgate/enter?room="+herdgatev1alpha1.RoomID(wq.Namespace, wq.Name) {
				return wq.Name
			}
		}
		t.Fatalf("%s %s: the enter link %q names no room", method, path, b.Enter)
		return ""
	}
	for _, c := range []struct{ method, path, room string }{
		{http.MethodPost, "/tickets", "tickets"},
		{http.MethodPost, "/tickets/1", "tickets"},
		{http.MethodGet, "/tickets/salesman", "tickets"}, // a prefix matches whole segments
		{http.MethodPost, "/tickets/sale", "sale"},
		{http.MethodPost, "/tickets/sale/7", "sale"},
		{http.MethodGet, "/Tickets/SALE/7", "sale"},
		{http.MethodGet, "/tickets//sale/./7", "sale"},
		{http.MethodGet, "/tickets/sale/vip", "vip"},
		{http.MethodGet, "/tickets/sale/%76ip", "vip"},
		{http.MethodPost, "/tickets/sale/vip", "sale"}, // vip protects GET alone
		{http.MethodGet, "/tickets/sale/vip/1", "sale"},
	} {
		if got := refusedBy(c.method, c.path); got != c.room {
			t.Errorf("%s %s went to room %s, want %s", c.method, c.path, got, c.room)
		}
	}
	// An open path goes to the room created first, and on to its upstream.
	if code, body, _ := ask(http.MethodGet, "/about"); code != http.StatusOK || body != "upstream GET /tickets/about" {
		t.Fatalf("an open path: %d %s; want the first room's upstream", code, body)
	}
	// The waiting page of a page's return is that page's room.
	for path, name := range map[string]string{"/tickets/3": "tickets", "/tickets/sale/3": "sale", "/tickets/sale/vip": "vip"} {
		code, body, _ := ask(http.MethodGet, "/.herdgate/?return="+url.QueryEscape(path), "Accept", "text/html")
		if code != http.StatusOK || !strings.Contains(body, "notice of "+name) || strings.Count(body, "notice of ") != 1 {
			t.Fatalf("the waiting page for %s: %d; want the notice of %s", path, code, name)
		}
	}

	// A visitor enters each room by its room parameter (as its links say) or by the page it waits
	// for (as the waiting page's calls say), under the room's own cookie names.
	visitors := map[string]string{}
	for i, wq := range rooms {
		path := "/.herdgate/enter?room=" + herdgatev1alpha1.RoomID(wq.Namespace, wq.Name)
		if i == 1 {
			path = "/.herdgate/enter?return=" + url.QueryEscape("/tickets/sale/9")
		}
		code, body, header := ask(http.MethodPost, path)
		if code != http.StatusOK || !strings.Contains(body, `"position":1`) {
			t.Fatalf("%s: enter: %d %s", wq.Name, code, body)
		}
		names := admission.CookieNamesOf(wq.Namespace, wq.Name)
		if visitors[wq.Name] = cookieOf(header, names.Visitor); visitors[wq.Name] == "" || names.Visitor == admission.VisitorCookie {
			t.Fatalf("%s: enter set %q; want the visitor cookie %s", wq.Name, header.Values("Set-Cookie"), names.Visitor)
		}
	}
	// The sale room admits its visitor; the pass, in the sale room's cookie, opens its route alone.
	sale := admission.CookieNamesOf("shop", "sale")
	q, _ := store.Queue("shop", "sale")
	if res, err := q.Admit(context.Background(), queue.AdmitRequest{TickID: 1, Limit: 1, PassTTL: 5 * time.Minute, AbandonAfter: 5 * time.Minute}); err != nil || len(res.Admitted) != 1 {
		t.Fatalf("the sale room's tick admitted %v, %v", res.Admitted, err)
	}
	var token string
	for range 5 { // the poll right after the entry comes too early: it waits as the 429 says
		code, body, header := ask(http.MethodGet, "/.herdgate/status?return="+url.QueryEscape("/tickets/sale/9"), "Cookie", sale.Visitor+"="+visitors["sale"])
		if code == http.StatusOK {
			if token = cookieOf(header, sale.Pass); token == "" {
				t.Fatalf("the sale room's admission set %q; want its pass cookie %s", header.Values("Set-Cookie"), sale.Pass)
			}
			break
		}
		time.Sleep(retryAfterOf(t, code, body))
	}
	if token == "" {
		t.Fatal("the sale room never admitted its visitor")
	}
	jar := sale.Visitor + "=" + visitors["sale"] + "; " + sale.Pass + "=" + token
	if code, body, _ := ask(http.MethodPost, "/tickets/sale/9", "Cookie", jar); code != http.StatusOK || body != "upstream POST /sale/tickets/sale/9" {
		t.Fatalf("the sale room's route with its pass: %d %s", code, body)
	}
	tickets := admission.CookieNamesOf("shop", "tickets")
	for what, cookie := range map[string]string{
		"the sale room's cookie":                           jar,
		"the sale room's pass under the first room's name": tickets.Visitor + "=" + visitors["tickets"] + "; " + tickets.Pass + "=" + token,
	} {
		if code, body, _ := ask(http.MethodPost, "/tickets/1", "Cookie", cookie); code != http.StatusForbidden || !strings.Contains(body, `"error":"pass_`) {
			t.Fatalf("%s on the first room's route: %d %s; want it refused", what, code, body)
		}
	}

	// A fourth room protecting the sale room's route is refused, and the route stays the sale room's.
	copied := room("copy", builder.Route("/tickets/sale", true, "GET"))
	late := addRoom(t, set, store, copied, []byte(strings.Repeat("d", 32)), time.Now())
	rec := httptest.NewRecorder()
	late.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `herdgate_proxy_config_refused{waitingqueue="shop/copy"} 1`) {
		t.Fatalf("the copying room's generation was not refused:\n%s", rec.Body.String())
	}
	if got := refusedBy(http.MethodGet, "/tickets/sale/8"); got != "sale" {
		t.Fatalf("the sale room's route after a copy came: room %s", got)
	}
}

// retryAfterOf is how long a status poll answered code with body says to wait: a 429's retryAfterMs.
func retryAfterOf(t *testing.T, code int, body string) time.Duration {
	t.Helper()
	var refusal struct {
		RetryAfterMs int64 `json:"retryAfterMs"`
	}
	if code != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &refusal) != nil || refusal.RetryAfterMs <= 0 {
		t.Fatalf("status: %d %s; want a place or a 429 that says when to come back", code, body)
	}
	return time.Duration(refusal.RetryAfterMs) * time.Millisecond
}
