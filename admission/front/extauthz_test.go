package front

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// grpcCheck serves ext_authz for two queues of the in-memory engine on a loopback port: shop/orders
// protects /checkout, shop/tickets /tickets and is Closed. It returns a client and shop/orders' proxy.
func grpcCheck(t *testing.T) (authv3.AuthorizationClient, *admission.Room) {
	t.Helper()
	proxies := map[string]*admission.Room{}
	for _, b := range []*builder.QueueBuilder{
		builder.Queue("shop", "orders").UID("uid-1").Routes(builder.Route("/checkout", true, "GET"), builder.Route("/api/v1/orders", false, "POST")),
		builder.Queue("shop", "tickets").UID("uid-2").Routes(builder.Route("/tickets", true, "GET")).Mode(herdgatev1alpha1.ModeClosed),
	} {
		wq := b.UpstreamURL("http://workload.internal:8080").Obj()
		room, _ := admissiontest.NewRoom(wq.Namespace+"/"+wq.Name, admissiontest.Config(t, wq), admission.Options{})
		proxies[room.Name()] = room
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := NewExtAuthzServer(&ExtAuthz{Room: func(name string) (*admission.Room, bool) {
		room, ok := proxies[name]
		return room, ok
	}})
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(server.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return authv3.NewAuthorizationClient(conn), proxies["shop/orders"]
}

// checkRequest is Envoy's CheckRequest for method path with headers, checked against queue.
func checkRequest(queueName, method, path string, headers map[string]string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "203.0.113.7"}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: method, Path: path, Host: "shop.example", Scheme: "https", Headers: headers}},
		ContextExtensions: map[string]string{QueueExtension: queueName},
	}}
}

func deniedHeader(res *authv3.CheckResponse, name string) string {
	for _, h := range res.GetDeniedResponse().GetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), name) {
			return h.GetHeader().GetValue()
		}
	}
	return ""
}

// TestTheGRPCCheckContract: through go-control-plane's client, as Envoy calls it: a valid pass is
// allowed with herdgate's headers removed and the Cookie header without herdgate's cookies; a
// browser without one is denied with a 303 to the waiting page and no pass; an API client with the
// JSON of the contract; a Closed room with 503 and Retry-After; each route's queue is the one its
// context extension names, and an unknown one is refused.
func TestTheGRPCCheckContract(t *testing.T) {
	client, orders := grpcCheck(t)
	ctx := context.Background()
	now := time.Now()
	visitor, cookie := orders.Config().Signer.NewVisitorCookie()
	token := orders.Config().Signer.Issue(visitor, now.Add(-time.Second), now.Add(time.Minute))

	res, err := client.Check(ctx, checkRequest("shop/orders", http.MethodGet, "/checkout/cart?step=2", map[string]string{
		"cookie":         "theme=dark; herdgate_visitor=" + cookie + "; herdgate_pass=" + token + ", lang=en",
		"herdgate-place": "1.x", "accept": "text/html",
	}))
	if err != nil {
		t.Fatal(err)
	}
	ok := res.GetOkResponse()
	if codes.Code(res.GetStatus().GetCode()) != codes.OK || ok == nil || !slices.Contains(ok.GetHeadersToRemove(), "x-herdgate-pass") || !slices.Contains(ok.GetHeadersToRemove(), "herdgate-place") ||
		!slices.Contains(ok.GetHeadersToRemove(), "herdgate-session") ||
		len(ok.GetHeaders()) != 1 || ok.GetHeaders()[0].GetHeader().GetValue() != "theme=dark; lang=en" {
		t.Fatalf("a valid pass: %v", res)
	}

	res, err = client.Check(ctx, checkRequest("shop/orders", http.MethodGet, "/checkout", map[string]string{"accept": "text/html"}))
	if err != nil {
		t.Fatal(err)
	}
	if d := res.GetDeniedResponse(); codes.Code(res.GetStatus().GetCode()) != codes.PermissionDenied || d.GetStatus().GetCode() != http.StatusSeeOther ||
		deniedHeader(res, "location") != "/.herdgate/?return=%2Fcheckout" || strings.Contains(deniedHeader(res, "set-cookie"), "herdgate_pass") {
		t.Fatalf("a browser without a pass: %v", res)
	}

	res, err = client.Check(ctx, checkRequest("shop/orders", http.MethodPost, "/api/v1/orders", map[string]string{"accept": "application/json"}))
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{}
	_ = json.Unmarshal([]byte(res.GetDeniedResponse().GetBody()), &body)
	if res.GetDeniedResponse().GetStatus().GetCode() != http.StatusForbidden || body["error"] != "pass_required" ||
		deniedHeader(res, "content-type") != "application/json" {
		t.Fatalf("an API client without a pass: %v", res)
	}

	// The same path is the other queue's to judge: /checkout is not protected there, /tickets is,
	// and the room is closed.
	if res, err = client.Check(ctx, checkRequest("shop/tickets", http.MethodGet, "/checkout", nil)); err != nil || res.GetOkResponse() == nil {
		t.Fatalf("/checkout under shop/tickets: %v %v; want it allowed", res, err)
	}
	if res, err = client.Check(ctx, checkRequest("shop/tickets", http.MethodGet, "/tickets/1", map[string]string{"accept": "application/json"})); err != nil ||
		res.GetDeniedResponse().GetStatus().GetCode() != http.StatusServiceUnavailable || deniedHeader(res, "retry-after") == "" {
		t.Fatalf("a closed room: %v %v; want 503 with Retry-After", res, err)
	}
	if res, err = client.Check(ctx, checkRequest("shop/nowhere", http.MethodGet, "/checkout", nil)); err != nil ||
		res.GetDeniedResponse().GetStatus().GetCode() != http.StatusServiceUnavailable {
		t.Fatalf("an unknown queue: %v %v; want it refused", res, err)
	}
	if res, err = client.Check(ctx, checkRequest("shop/orders", http.MethodPost, "/.herdgate/enter", nil)); err != nil || res.GetOkResponse() == nil {
		t.Fatalf("herdgate's own path: %v %v; want it left to the route to herdgate", res, err)
	}
}
