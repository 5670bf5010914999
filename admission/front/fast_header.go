package front

import (
	"bytes"
	"iter"
	"strings"

	"github.com/valyala/fasthttp"
)

// validHeaderNames reports whether every header line is a token, a colon and a value, with no line
// folded onto the one before it (RFC 9110 §5.1, RFC 9112 §5.2), and the body's framing is one:
// a request with both Content-Length and Transfer-Encoding is how requests are smuggled past a
// proxy that reads one and an upstream that reads the other (RFC 9112 §6.1).
func validHeaderNames(h *fasthttp.RequestHeader) bool {
	raw := h.RawHeaders()
	length, chunked := false, false
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false // a folded continuation, or no name
		}
		name := line[:colon]
		for _, c := range name {
			if !isTokenChar(c) {
				return false
			}
		}
		length = length || bytes.EqualFold(name, []byte("Content-Length"))
		chunked = chunked || bytes.EqualFold(name, []byte("Transfer-Encoding"))
	}
	return !length || !chunked
}

func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// fastHeader is a fasthttp request header as the forwarding policy changes it.
type fastHeader struct{ h *fasthttp.RequestHeader }

func (h fastHeader) Set(name, value string) { h.h.Set(name, value) }
func (h fastHeader) Del(name string)        { h.h.Del(name) }

func (h fastHeader) DelMatching(own func(name []byte) bool) {
	var found []string
	for name := range h.h.All() {
		if own(name) {
			found = append(found, string(name))
		}
	}
	for _, name := range found {
		h.h.Del(name)
	}
}

// DelCookiesMatching works on the cookies as fasthttp parsed them from every Cookie header, which is
// also how it writes them upstream: what is judged is what is sent.
func (h fastHeader) DelCookiesMatching(own func(name []byte) bool) {
	found := false
	for key, value := range h.h.Cookies() {
		if own(key) || len(key) == 0 && own(value) {
			found = true
			break
		}
	}
	if !found {
		return
	}
	var kept []byte
	for key, value := range h.h.Cookies() {
		if own(key) || len(key) == 0 && own(value) {
			continue
		}
		if len(kept) > 0 {
			kept = append(kept, ';', ' ')
		}
		if len(key) > 0 {
			kept = append(append(kept, key...), '=')
		}
		kept = append(kept, value...)
	}
	h.h.DelAllCookies()
	if len(kept) > 0 {
		h.h.SetBytesV("Cookie", kept)
	}
}

func isUpper(b []byte) bool {
	for _, c := range b {
		if 'a' <= c && c <= 'z' {
			return false
		}
	}
	return true
}

type header interface {
	All() iter.Seq2[[]byte, []byte]
	Del(string)
}

// removeHopHeaders deletes the hop-by-hop headers and those the Connection header names; one pass
// over the headers, since most requests carry none.
func removeHopHeaders(h header, connection string) {
	var found []string
	for name := range h.All() {
		for _, hop := range hopHeaders {
			if len(name) == len(hop) && strings.EqualFold(string(name), hop) {
				found = append(found, hop)
			}
		}
	}
	for _, name := range found {
		h.Del(name)
	}
	for name := range strings.SplitSeq(connection, ",") {
		if name = strings.TrimSpace(name); name != "" {
			h.Del(name)
		}
	}
}

// requestPath is the escaped path of a request target, in origin form or absolute form.
func requestPath(target []byte) string {
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if i := bytes.Index(target, []byte("://")); i > 0 && target[0] != '/' {
		target = target[i+3:]
		if j := bytes.IndexByte(target, '/'); j >= 0 {
			target = target[j:]
		} else {
			target = []byte("/")
		}
	}
	return string(target)
}
