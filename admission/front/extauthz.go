package front

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/herdgate/herdgate/admission"
)

// Envoy's external authorization (ext_authz, gRPC): the gateway check for Envoy, Envoy Gateway,
// Istio and the Gateway API's ExternalAuth filter. Envoy sends the request's attributes; the gate
// decides as for the HTTP check (DecideForGateway), and the answer is an OkHttpResponse that removes
// herdgate's headers and cookies before the upstream, or the gate's own answer as a
// DeniedHttpResponse. docs/guides/gateways.md has the configuration.

// QueueExtension is the context extension that names the queue a route's requests are checked
// against (namespace/name), so that one check service serves many queues.
const QueueExtension = "herdgate.io/queue"

// ownRequestHeaders are herdgate's request headers an allowed request must not carry upstream.
// sessionHeader is admission.SessionHeader as Envoy names headers.
var sessionHeader = strings.ToLower(admission.SessionHeader)

var ownRequestHeaders = []string{"x-herdgate-pass", "herdgate-place", "x-herdgate-proof", "x-herdgate-invitation", "x-herdgate-challenge-response"}

// ExtAuthz answers Envoy's Authorization/Check for the queues its proxies serve.
type ExtAuthz struct {
	authv3.UnimplementedAuthorizationServer
	// Room finds a room by its name (namespace/name); "" asks for the one room a service of a
	// single room serves.
	Room func(name string) (*admission.Room, bool)
}

// Check judges the request Envoy describes.
func (e *ExtAuthz) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	attrs := req.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	room, ok := e.Room(attrs.GetContextExtensions()[QueueExtension])
	if !ok {
		return denied(http.StatusServiceUnavailable, http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"error":"unknown_queue","message":"no queue of this check service is named `+QueueExtension+`"}`+"\n")), nil
	}
	path, rawQuery, _ := strings.Cut(h.GetPath(), "?")
	x := &envoyExchange{ctx: ctx, method: h.GetMethod(), rawQuery: rawQuery, headers: h.GetHeaders(), scheme: h.GetScheme(),
		host: h.GetHost(), peer: peerOf(attrs.GetSource().GetAddress().GetSocketAddress().GetAddress())}
	return renderGRPC(judge(room, x, path, strings.IndexByte(h.GetPath(), '#') >= 0)), nil
}

// renderGRPC is the gate's verdict as ext_authz answers it: an allow that removes herdgate's
// headers and cookies before the upstream and gives the workload the session's handle, herdgate's
// own path let through as it is, or the gate's answer as a DeniedHttpResponse.
func renderGRPC(v verdict) *authv3.CheckResponse {
	switch v.kind {
	case admission.Reserved:
		return &authv3.CheckResponse{Status: &status.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}}}
	case admission.Answer:
		header := v.reply.Header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set("Content-Type", v.reply.ContentType)
		for _, c := range v.reply.Cookies {
			header.Add("Set-Cookie", c.String())
		}
		return denied(v.reply.Status, header, v.reply.Body)
	}
	res := allowed(&v.cookie)
	// The session's handle for the workload overwrites a visitor's own; without one, a visitor's is
	// removed.
	okRes := res.GetOkResponse()
	if v.session != "" {
		okRes.Headers = append(okRes.Headers, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: sessionHeader, Value: v.session},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	} else {
		okRes.HeadersToRemove = append(slices.Clip(okRes.HeadersToRemove), sessionHeader)
	}
	return res
}

// allowed lets the request through without herdgate's headers, and with cookies in place of its
// Cookie header when given (none left: the header goes).
func allowed(cookies *string) *authv3.CheckResponse {
	ok := &authv3.OkHttpResponse{HeadersToRemove: ownRequestHeaders}
	if cookies != nil {
		if *cookies == "" {
			ok.HeadersToRemove = append(ok.HeadersToRemove, "cookie")
		} else {
			ok.Headers = []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: "cookie", Value: *cookies},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}}
		}
	}
	return &authv3.CheckResponse{
		Status:       &status.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok},
	}
}

// denied answers the visitor with code, header and body.
func denied(code int, header http.Header, body []byte) *authv3.CheckResponse {
	d := &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode(code)}, Body: string(body)}
	for name, values := range header {
		for _, v := range values {
			d.Headers = append(d.Headers, &corev3.HeaderValueOption{
				Header:       &corev3.HeaderValue{Key: strings.ToLower(name), Value: v},
				AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
			})
		}
	}
	return &authv3.CheckResponse{
		Status:       &status.Status{Code: int32(codes.PermissionDenied)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: d},
	}
}

func peerOf(address string) netip.Addr {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// envoyExchange is the request Envoy describes, as the gate sees it; the gate's answer is kept.
type envoyExchange struct {
	ctx              context.Context
	method, rawQuery string
	// headers are the request's, by lower-case name; Envoy joins repeated ones with commas.
	headers map[string]string
	scheme  string
	// host is the request's host (its :authority), as Envoy names it.
	host string
	peer netip.Addr
}

func (x *envoyExchange) Context() context.Context { return x.ctx }
func (x *envoyExchange) Method() string           { return x.method }
func (x *envoyExchange) Header(name string) string {
	return x.headers[strings.ToLower(name)]
}

func (x *envoyExchange) HeaderCount(name string) int {
	if _, ok := x.headers[strings.ToLower(name)]; ok {
		return 1
	}
	return 0
}

func (x *envoyExchange) HeaderValues(name string) []string {
	name = strings.ToLower(name)
	v, ok := x.headers[name]
	if !ok {
		return nil
	}
	if name == "cookie" {
		// Envoy joins the Cookie lines of a request with commas, which no cookie holds (RFC 6265).
		return []string{strings.ReplaceAll(v, ",", ";")}
	}
	return []string{v}
}
func (x *envoyExchange) RemoteAddr() netip.Addr { return x.peer }
func (x *envoyExchange) RawQuery() string       { return x.rawQuery }
func (x *envoyExchange) Host() string           { return x.host }

func (x *envoyExchange) Cookie(name string) string {
	for _, line := range x.HeaderValues("Cookie") {
		for part := range strings.SplitSeq(line, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && k == name {
				return v
			}
		}
	}
	return ""
}

func (x *envoyExchange) Secure() bool {
	return x.scheme == "https" || x.Header("X-Forwarded-Proto") == "https"
}

// The gate writes nothing to the request it judges (its answer is in the Decision).
func (x *envoyExchange) SetHeader(string, string)  {}
func (x *envoyExchange) SetCookie(*http.Cookie)    {}
func (x *envoyExchange) Reply(int, string, []byte) {}

// NewExtAuthzServer is a gRPC server answering Envoy's Authorization/Check with e.
func NewExtAuthzServer(e *ExtAuthz) *grpc.Server {
	s := grpc.NewServer()
	authv3.RegisterAuthorizationServer(s, e)
	return s
}

// OneRoom serves room's room alone: a check naming no room, or room's, is room's.
func OneRoom(room *admission.Room) func(string) (*admission.Room, bool) { return room.Named }
