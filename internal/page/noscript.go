package page

import (
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/herdgate/herdgate/internal/phase"
)

// The waiting page for browsers without JavaScript: the proxy renders where the visitor stands into
// the same template, and the page refreshes itself by a meta tag at the visitor's next poll.

// WithoutScriptPath is the page without JavaScript, under the proxy's reserved prefix.
const WithoutScriptPath = "/.herdgate/wait"

// WithoutScriptURL is the address of the page without JavaScript that returns the visitor to ret,
// carrying the entry's invitation and lane code from the page's address ("" for none). Its first
// load enters, as the script does when its page opens; polling marks the loads after it (the page's
// refreshes), which poll and so must keep to the visitor's poll interval.
func WithoutScriptURL(ret string, carried Carried, polling bool) string {
	q := url.Values{"return": {ret}}
	if carried.Invitation != "" {
		q.Set("invitation", carried.Invitation)
	}
	if carried.LaneCode != "" {
		q.Set("code", carried.LaneCode)
	}
	if polling {
		q.Set("poll", "1")
	}
	return WithoutScriptPath + "?" + q.Encode()
}

// Carried is what the waiting page's address brings for the entry: an invitation (?invitation=) and
// a lane's code (?code=).
type Carried struct{ Invitation, LaneCode string }

// CarriedOf reads what the page's query carries for the entry.
func CarriedOf(query url.Values) Carried {
	return Carried{Invitation: query.Get("invitation"), LaneCode: query.Get("code")}
}

// SendWithoutScript makes the page with the script send a browser without JavaScript to target,
// the page that works without it.
func (d *Data) SendWithoutScript(target string) {
	d.Head = template.HTML(`<noscript><meta http-equiv="refresh" content="0; url=` + template.HTMLEscapeString(target) + `"></noscript>`)
}

// State is where a visitor stands, as the page without JavaScript shows it.
type State struct {
	Phase phase.Phase
	// Position and Depth are the visitor's place and the queue's length; Bound says the position
	// is an upper bound (far from the front).
	Position, Depth int64
	Bound           bool
	// EstimatedWait is nil while no plan is published; CapacityChanged says it follows a capacity
	// that changed since the visitor's previous poll.
	EstimatedWait   *time.Duration
	CapacityChanged bool
	// OpensAt, PreQueueFrom and ClosesAt are the schedule's times; zero when unset.
	OpensAt, PreQueueFrom, ClosesAt time.Time
	// Title and Summary, when set, are text keys shown in place of the state's own (a busy queue, a
	// waiting room that needs JavaScript or an invitation).
	Title, Summary string
}

// WithoutScript makes d the page without JavaScript: no script, st shown, and, when refresh is
// positive, a refresh of the page at self after refresh (rounded up to whole seconds: a meta
// refresh counts seconds, and sooner would be too early).
func (d *Data) WithoutScript(st State, refresh time.Duration, self string) {
	d.Script = ""
	t := func(key string, vars ...string) string { return Text(d.Lang, key, vars...) }
	clock := func(at time.Time) string { return at.UTC().Format("15:04") + " UTC" }
	d.Title, d.Position, d.Wait, d.Progress = t("title"), "…", "", 0
	switch {
	case st.Phase == phase.Scheduled:
		d.Title, d.Position = t("titleScheduled"), ""
		d.Summary = t("summaryScheduled", "opensAt", clock(st.OpensAt), "preQueueFrom", clock(st.PreQueueFrom))
	case st.Phase == phase.PreQueue:
		d.Title, d.Position = t("titlePreQueue"), ""
		key := "summaryPreQueue"
		if st.Depth == 1 {
			key = "summaryPreQueueOne"
		}
		d.Summary = t(key, "depth", strconv.FormatInt(st.Depth, 10), "opensAt", clock(st.OpensAt))
	case st.Phase == phase.Opening && st.Position <= 0:
		d.Title, d.Summary = t("titleOpening"), t("summaryOpening")
	case st.Phase == phase.Closed:
		d.Title, d.Position = t("titleClosed"), t("positionClosed")
		switch {
		case st.Position > 0:
			d.Summary = t("summaryClosedKept", "position", strconv.FormatInt(st.Position, 10))
		case !st.ClosesAt.IsZero():
			d.Summary = t("summaryClosedAt", "closesAt", clock(st.ClosesAt))
		default:
			d.Summary = t("summaryClosed")
		}
	case st.Position > 0:
		d.Position = "#" + strconv.FormatInt(st.Position, 10)
		key := "summaryLine"
		if st.Bound {
			key = "summaryLineBound"
		}
		d.Summary = t(key, "position", strconv.FormatInt(st.Position, 10), "depth", strconv.FormatInt(st.Depth, 10))
		if st.Depth > 0 {
			d.Progress = int(100 * (st.Depth - st.Position) / st.Depth)
		}
		d.Wait = waitWords(d.Lang, st.EstimatedWait)
		if st.CapacityChanged && d.Wait != "" {
			d.Wait += " " + t("capacityChanged")
		}
	default:
		d.Position, d.Summary, d.Progress = t("positionNext"), t("summaryAlmost"), 100
	}
	if st.Title != "" {
		d.Title, d.Position = t(st.Title), ""
	}
	if st.Summary != "" {
		d.Summary = t(st.Summary)
	}
	if d.Progress > 0 {
		// The bar's width goes in the page's own style block, which its policy allows by hash.
		d.Style = template.HTML("<style>\n" + style + "#fill { width: " + strconv.Itoa(d.Progress) + "%; }\n</style>")
	}
	if refresh <= 0 {
		d.Head = ""
		return
	}
	seconds := int64((refresh + time.Second - 1) / time.Second)
	d.Head = template.HTML(`<meta http-equiv="refresh" content="` + strconv.FormatInt(seconds, 10) + `; url=` + template.HTMLEscapeString(self) + `">`)
	d.Wait = strings.TrimSpace(d.Wait + " " + t("summaryRefreshes", "seconds", strconv.FormatInt(seconds, 10)))
}

// Text is the text key in lang (English when lang has no texts), its {names} filled from the
// name, value pairs of vars.
func Text(lang, key string, vars ...string) string {
	ts, ok := texts[lang]
	if !ok {
		ts = texts["en"]
	}
	s, ok := ts[key]
	if !ok {
		return key
	}
	for i := 0; i+1 < len(vars); i += 2 {
		s = strings.ReplaceAll(s, "{"+vars[i]+"}", vars[i+1])
	}
	return s
}

// waitWords says an estimated wait as the page's script does.
func waitWords(lang string, wait *time.Duration) string {
	if wait == nil {
		return ""
	}
	if *wait < time.Minute {
		return Text(lang, "waitUnderMinute")
	}
	m := int64((*wait + 30*time.Second) / time.Minute)
	if m == 1 {
		return Text(lang, "waitOneMinute")
	}
	return Text(lang, "waitMinutes", "minutes", strconv.FormatInt(m, 10))
}
