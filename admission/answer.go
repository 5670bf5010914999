package admission

import (
	"encoding/json"
	"html"
	"net/http"
	"strconv"
	"time"
)

// An answer is what herdgate says to a request it answers itself, as a value: the visitor API makes
// one for every request to its paths, the gate for every request it does not let through (and, for
// one it forwards, what it adds to the upstream's answer). render, below, is the one writer of them
// all, and counts each: no other code writes an answer's bytes. An answer without a status says
// nothing: nobody is left to read one, or only headers and cookies are added to the upstream's.
type answer struct {
	status int
	// body is sent as JSON, never cached; raw, of contentType, is a body of another kind, sent with
	// the headers the answer names.
	body        any
	raw         []byte
	contentType string
	// retryAfter, when set, is sent as Retry-After, in whole seconds and at least one.
	retryAfter time.Duration
	// location, when set, makes the answer a 303 See Other to it.
	location string
	header   [][2]string
	cookies  []*http.Cookie
	// notice is the operator's notice (spec.page.message), added to a JSON object body.
	notice string
	// class and outcome label herdgate_proxy_requests_total; an answer without an outcome is not
	// counted. alsoCounted are the labels of answers this one was made of (the page without
	// JavaScript shows what enter and status said), counted with it.
	class, outcome string
	alsoCounted    [][2]string
}

// jsonAnswer is status with body as JSON.
func jsonAnswer(status int, body any) answer { return answer{status: status, body: body} }

// errorAnswer is status with the JSON body of every error answer.
func errorAnswer(status int, body errorBody) answer { return answer{status: status, body: body} }

// redirect sends a browser to location with 303 See Other.
func redirect(location string) answer { return answer{status: http.StatusSeeOther, location: location} }

// counted is a, counted under class and outcome.
func (a answer) counted(class, outcome string) answer {
	a.class, a.outcome = class, outcome
	return a
}

// retry is a, with Retry-After d.
func (a answer) retry(d time.Duration) answer {
	a.retryAfter = d
	return a
}

func (a *answer) setHeader(name, value string) { a.header = append(a.header, [2]string{name, value}) }

func (a *answer) setCookie(c *http.Cookie) { a.cookies = append(a.cookies, c) }

// RoomAnswer is one of herdgate's own answers as a value, counted when written: the visitor API's to
// herdgate's own paths (Room.AnswerReserved), the answer to a host no room serves (AnswerUnrouted),
// and to a forward that failed (UpstreamCall.Failed). A front writes it through its exchange with
// WriteTo, where the gate's decisions carry a Reply for fronts and checks to write in their own form.
type RoomAnswer struct {
	a answer
	m *metrics
}

// WriteTo writes the answer through x, and counts it. An answer with nothing to say (the visitor
// went away) writes nothing.
func (a RoomAnswer) WriteTo(x Exchange) { render(x, a.a, a.m) }

// replyOf is a as a Reply, which a front writes in its own form: the answer of the gate when refusal
// says it answers itself (an answer that is no refusal never reads as an allow: mustRefuse), and
// otherwise what it adds to the upstream's answer.
func replyOf(a answer, refusal bool, m *metrics) Reply {
	w := &replyWriter{}
	render(w, a, m)
	if refusal {
		w.reply.mustRefuse()
	}
	return w.reply
}

// mustRefuse makes an answer of the gate's a refusal, whatever it says: a gate that answers a
// request it does not let through with a 2xx (or with nothing) must never read as an allow to a
// gateway.
func (r *Reply) mustRefuse() {
	switch {
	case r.Status == 0:
		r.Status, r.ContentType, r.Body = http.StatusServiceUnavailable, "application/json",
			[]byte(`{"error":"unavailable","message":"the waiting room gave no answer; try again shortly"}`+"\n")
	case r.Status < 300:
		r.Status, r.ContentType, r.Body = http.StatusInternalServerError, "application/json", []byte(`{"error":"internal"}`+"\n")
	}
}

// replyWriter keeps what render writes in a Reply.
type replyWriter struct {
	Exchange
	reply Reply
}

func (w *replyWriter) SetHeader(name, value string) {
	if w.reply.Header == nil {
		w.reply.Header = http.Header{}
	}
	w.reply.Header.Set(name, value)
}

func (w *replyWriter) SetCookie(c *http.Cookie) { w.reply.Cookies = append(w.reply.Cookies, c) }

func (w *replyWriter) Reply(status int, contentType string, body []byte) {
	w.reply.Status, w.reply.ContentType, w.reply.Body = status, contentType, body
}

// render writes a through x and counts it in m (nil counts nothing).
func render(x Exchange, a answer, m *metrics) {
	if m != nil && a.status != 0 {
		for _, c := range append([][2]string{{a.class, a.outcome}}, a.alsoCounted...) {
			if c[1] != "" {
				m.requests.WithLabelValues(c[0], c[1]).Inc()
			}
		}
	}
	for _, c := range a.cookies {
		x.SetCookie(c)
	}
	for _, h := range a.header {
		x.SetHeader(h[0], h[1])
	}
	if a.status == 0 {
		// No answer, or what is added to the upstream's.
		return
	}
	if a.retryAfter > 0 {
		x.SetHeader("Retry-After", strconv.FormatInt(max(1, int64((a.retryAfter+time.Second-1)/time.Second)), 10))
	}
	switch {
	case a.location != "":
		x.SetHeader("Location", a.location)
		x.Reply(a.status, "text/html; charset=utf-8", []byte(`<a href="`+html.EscapeString(a.location)+`">See Other</a>.`+"\n"))
	case a.raw != nil:
		x.Reply(a.status, a.contentType, a.raw)
	default:
		status, body := a.status, encodeJSON(a.body, a.notice)
		if body == nil {
			status, body = http.StatusInternalServerError, []byte(`{"error":"internal"}`+"\n")
		}
		x.SetHeader("Cache-Control", "no-store")
		x.Reply(status, "application/json", body)
	}
}

// encodeJSON is body as a line of JSON, with notice first in it when body is an object; nil when
// body cannot be encoded.
func encodeJSON(body any, notice string) []byte {
	b, err := json.Marshal(body)
	if err != nil {
		return nil
	}
	if notice != "" && len(b) > 1 && b[0] == '{' {
		n, _ := json.Marshal(notice)
		out := make([]byte, 0, len(b)+len(n)+13)
		out = append(append(append(out, `{"notice":`...), n...), ',')
		if b[1] == '}' {
			out = out[:len(out)-1]
		}
		b = append(out, b[1:]...)
	}
	return append(b, '\n')
}

// ReplyError answers x with status and the JSON body of every error answer: an error code and,
// when not empty, a message. Fronts answer their own refusals (a malformed request, a panic) with it.
func ReplyError(x Exchange, status int, code, message string) {
	render(x, errorAnswer(status, errorBody{Error: code, Message: message}), nil)
}
