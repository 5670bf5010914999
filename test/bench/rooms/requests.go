package main

import (
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// The API server counts every request it answers (apiserver_request_total) but not who sent it. The
// bench's own requests (the rooms it makes and lists, the samples it takes) are counted on its side
// with the same key, "VERB resource[/subresource]", and taken off, so that what a window reports is
// what the manager sent.

// requestCounter counts the requests a client sends, by the API server's key.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]float64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if key := requestKey(r.Method, r.URL, r.Header.Get("Content-Type")); key != "" {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]float64{}
			}
			c.counts[key]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// snapshot is a copy of the counts so far.
func (c *requestCounter) snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKey is how apiserver_request_total names a request: its verb (LIST and WATCH for reads of a
// collection, APPLY for a server-side apply), its resource and subresource; "" for a request that
// names no resource (/metrics, discovery).
func requestKey(method string, u *url.URL, contentType string) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return ""
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, named := parts[0], len(parts) > 1
	verb := method
	switch {
	case method == http.MethodGet && u.Query().Get("watch") == "true":
		verb = "WATCH"
	case method == http.MethodGet && !named:
		verb = "LIST"
	case method == http.MethodPatch && strings.HasPrefix(contentType, "application/apply-patch"):
		verb = "APPLY"
	case method == http.MethodDelete && !named:
		verb = "DELETECOLLECTION"
	}
	key := verb + " " + resource
	if len(parts) > 2 {
		key += "/" + parts[2]
	}
	return key
}

// isWrite says a key's verb changes something.
func isWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}
