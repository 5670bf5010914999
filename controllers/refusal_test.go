package controllers

import (
	"strings"
	"testing"

	"github.com/herdgate/herdgate/internal/queue"
)

// TestARefusalSaysWhatTheReplicaServes: the Programmed condition's message says what a replica that
// refuses a generation serves meanwhile: an older generation, nothing yet, or (a room of a shared set
// refused a route an older room holds) the same generation but for what it refuses; never that it
// keeps serving the generation it refuses.
func TestARefusalSaysWhatTheReplicaServes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		report     queue.ProxyReport
		want, dont string
	}{
		{"an older generation", queue.ProxyReport{Replica: "p-0", Generation: 3, RefusedGeneration: 4, Refusal: "bad"},
			"cannot apply generation 4 and keeps serving generation 3: bad", ""},
		{"nothing yet", queue.ProxyReport{Replica: "p-0", RefusedGeneration: 1, Refusal: "bad"},
			"cannot apply generation 1 and serves no generation of this room yet: bad", "keeps serving"},
		{"its generation but a route", queue.ProxyReport{Replica: "set-0", Generation: 1, RefusedGeneration: 1, Refusal: "spec.protectedRoutes[0]: held"},
			"serves generation 1 but for what it refuses: spec.protectedRoutes[0]: held", "keeps serving"},
	} {
		got := refusalOf(tc.report)
		if !strings.Contains(got, tc.want) || (tc.dont != "" && strings.Contains(got, tc.dont)) {
			t.Errorf("%s: %q; want it to say %q", tc.name, got, tc.want)
		}
	}
}
