package page

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herdgate/herdgate/internal/phase"
)

// TestThePageWithoutScriptShowsWhereTheVisitorStands renders each state as the page without
// JavaScript shows it: the texts the script would write, and a refresh in whole seconds, never
// sooner than asked.
func TestThePageWithoutScriptShowsWhereTheVisitorStands(t *testing.T) {
	opens := time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)
	twoMinutes := 2 * time.Minute
	type shown struct{ Title, Position, Summary, Wait, Head string }
	for _, c := range []struct {
		name    string
		st      State
		refresh time.Duration
		want    shown
	}{
		{"a place", State{Phase: phase.Open, Position: 12, Depth: 340, EstimatedWait: &twoMinutes}, 4300 * time.Millisecond,
			shown{"You are in line", "#12", "You are number 12 of 340 in line.", "Estimated wait: about 2 minutes. This page refreshes by itself in 5 s. Reloading sooner does not move you up.",
				`<meta http-equiv="refresh" content="5; url=/.herdgate/wait?poll=1&amp;return=%2Fx">`}},
		{"a place after the capacity changed", State{Phase: phase.Open, Position: 12, Depth: 340, EstimatedWait: &twoMinutes, CapacityChanged: true}, 4300 * time.Millisecond,
			shown{"You are in line", "#12", "You are number 12 of 340 in line.", "Estimated wait: about 2 minutes. The site changed how many visitors it lets in at a time, so your wait changed. This page refreshes by itself in 5 s. Reloading sooner does not move you up.",
				`<meta http-equiv="refresh" content="5; url=/.herdgate/wait?poll=1&amp;return=%2Fx">`}},
		{"a bound far back", State{Phase: phase.Open, Position: 9000, Depth: 10000, Bound: true}, 500 * time.Millisecond,
			shown{"You are in line", "#9000", "You are at most number 9000 of 10000 in line.", "This page refreshes by itself in 1 s. Reloading sooner does not move you up.",
				`<meta http-equiv="refresh" content="1; url=/.herdgate/wait?poll=1&amp;return=%2Fx">`}},
		{"admitted in a moment", State{Phase: phase.Open}, 200 * time.Millisecond,
			shown{"You are in line", "Next", "It is almost your turn.", "This page refreshes by itself in 1 s. Reloading sooner does not move you up.",
				`<meta http-equiv="refresh" content="1; url=/.herdgate/wait?poll=1&amp;return=%2Fx">`}},
		{"the pre-queue", State{Phase: phase.PreQueue, Depth: 7, OpensAt: opens}, time.Second,
			shown{"You are in the pre-queue", "", "You have a place in the pre-queue, with 7 visitors so far. At 18:00 UTC everyone in it gets a place in line by a fair draw: when you came does not matter.",
				"This page refreshes by itself in 1 s. Reloading sooner does not move you up.", `<meta http-equiv="refresh" content="1; url=/.herdgate/wait?poll=1&amp;return=%2Fx">`}},
		{"a closed room, the place kept", State{Phase: phase.Closed, Position: 3}, time.Minute,
			shown{"The waiting room is closed", "Closed", "It is closed for now. You keep your place, number 3; this page moves on by itself when it reopens.",
				"This page refreshes by itself in 60 s. Reloading sooner does not move you up.", `<meta http-equiv="refresh" content="60; url=/.herdgate/wait?poll=1&amp;return=%2Fx">`}},
		{"a challenge it cannot solve", State{Phase: phase.Open, Summary: "summaryNeedsScript"}, 0,
			shown{"You are in line", "Next", "This waiting room checks your browser with JavaScript. Turn JavaScript on and reload this page; you keep your place.", "", ""}},
		{"an invitation", State{Phase: phase.Open, Title: "titleInvitation", Summary: "summaryInvitationOnly"}, 0,
			shown{"By invitation only", "", "This waiting room takes invited visitors only. Open it from the link the site gave you.", "", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := NewData("en", "/x")
			d.WithoutScript(c.st, c.refresh, WithoutScriptURL("/x", Carried{}, true))
			got := shown{d.Title, d.Position, d.Summary, d.Wait, string(d.Head)}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if d.Script != "" {
				t.Error("the page without JavaScript carries the script")
			}
			body, err := Builtin().Render(d)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(body), ">"+d.Summary+"<") && !strings.Contains(string(body), ">"+strings.ReplaceAll(d.Summary, "'", "&#39;")+"<") {
				t.Errorf("the built-in page does not show the summary:\n%s", body)
			}
		})
	}
	d := NewData("ko", "/x")
	d.WithoutScript(State{Phase: phase.Open, Position: 2, Depth: 5}, time.Second, WithoutScriptURL("/x", Carried{Invitation: "inv", LaneCode: "c"}, true))
	if d.Summary != "대기 순번 2번 / 전체 5명" || !strings.Contains(string(d.Head), "invitation=inv") || !strings.Contains(string(d.Head), "code=c") {
		t.Errorf("in Korean, with an invitation: %q %q", d.Summary, d.Head)
	}
}
