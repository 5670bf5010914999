package front

import "github.com/herdgate/herdgate/admission"

// verdict is the gate's decision on a request a gateway asked about, as every check renders it: the
// HTTP check in each gateway's convention (check.go), and Envoy's gRPC ext_authz (extauthz.go). The
// checks read the request in their own ways and write their answers in their own forms, and agree
// on everything between, which is here.
type verdict struct {
	// kind: Forward lets the request through, Answer refuses it with reply, Reserved lets it go on
	// to herdgate's own endpoints as it is.
	kind admission.Verdict
	// session is the handle of the request's session for the workload (SessionHeader); "" removes a
	// visitor's own. cookie is the request's Cookie header without herdgate's cookies.
	session, cookie string
	reply           admission.Reply
}

// judge asks the gate of room about the request x describes, whose path is path (as it came) and
// whose target carried a '#' when fragment, and records an allowed one.
func judge(room *admission.Room, x admission.Exchange, path string, fragment bool) verdict {
	d := room.DecideForGateway(x, path, fragment)
	v := verdict{kind: d.Verdict(), reply: d.Reply()}
	if v.kind == admission.Forward {
		room.Allowed(d)
		v.session, v.cookie = d.Session(), withoutOwnCookies(x.HeaderValues("Cookie"))
	}
	return v
}
