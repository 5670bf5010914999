package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// window is what happened between two samples.
type window struct {
	seconds                            float64
	manager, redis, apiserver, etcd    float64 // share of one core
	managerRSS                         int64   // at the end
	redisCommands, apiWrites, apiReads float64 // per second, the manager's
	statusWrites                       int64   // in the whole window
	// requests are the manager's requests per second, and requestCounts how many, by
	// "VERB resource[/subresource]".
	requests, requestCounts map[string]float64
	// counted is the time between the manager's counters read at the window's start and end.
	counted float64
	// scrapeCPU is what the manager spent while the sample at the window's end read its metrics.
	scrapeCPU     time.Duration
	before, after sample
}

// requestsPerRoom is how many requests the manager sent in the window per room made.
func (w window) requestsPerRoom(rooms int) float64 {
	var n float64
	for _, c := range w.requestCounts {
		n += c
	}
	return n / float64(max(rooms, 1))
}

// between is the window from the end of sample a to the start of sample b, so that the CPU the
// samples' own reads cost is not in it.
func between(a, b sample) window {
	sec := b.at.Sub(a.doneAt).Seconds()
	share := func(x, y time.Duration) float64 { return (y - x).Seconds() / sec }
	from, to := a.cpuDone, b.cpu
	// Redis' and the API server's counters are read first thing in each sample.
	read := b.at.Sub(a.at).Seconds()
	w := window{
		seconds: sec, before: a, after: b,
		manager: share(from.manager, to.manager), redis: share(from.redis, to.redis), apiserver: share(from.apiserver, to.apiserver), etcd: share(from.etcd, to.etcd),
		scrapeCPU:     b.cpuDone.manager - b.cpu.manager,
		counted:       b.scrapedAt.Sub(a.scrapedAt).Seconds(),
		managerRSS:    b.managerRSS,
		redisCommands: float64(b.redisCommands-a.redisCommands) / read,
		statusWrites:  int64(math.Round(b.apiStatusWrites - a.apiStatusWrites)),
		requests:      map[string]float64{},
		requestCounts: map[string]float64{},
	}
	for what, n := range b.requestsBy {
		// The bench's requests counted between the two reads of the server's counts.
		d := n - a.requestsBy[what] - (b.benchBy[what] - a.benchBy[what])
		if d < 0.5 {
			continue
		}
		w.requests[what], w.requestCounts[what] = d/read, d
		if isWrite(what) {
			w.apiWrites += d / read
		} else {
			w.apiReads += d / read
		}
	}
	return w
}

// reconciles is how many WaitingQueues the manager reconciled per second in the window, by
// controller-runtime's controller_runtime_reconcile_total.
func (w window) reconciles() float64 {
	total := func(s sample) (n float64) {
		for _, m := range s.families["controller_runtime_reconcile_total"].GetMetric() {
			if label(m, "controller") == "waitingqueue" {
				n += m.GetCounter().GetValue()
			}
		}
		return n
	}
	return (total(w.after) - total(w.before)) / w.counted
}

// topRequests names the manager's requests the window saw most, with their rates per second; writes
// only, or every request.
func (w window) topRequests(n int, writesOnly bool) string {
	type kind struct {
		what string
		rate float64
	}
	var kinds []kind
	for what, rate := range w.requests {
		if !writesOnly || isWrite(what) {
			kinds = append(kinds, kind{what, rate})
		}
	}
	slices.SortFunc(kinds, func(a, b kind) int { return cmp.Or(cmp.Compare(b.rate, a.rate), cmp.Compare(a.what, b.what)) })
	var parts []string
	for _, k := range kinds[:min(n, len(kinds))] {
		parts = append(parts, fmt.Sprintf("%s %.2f/s", k.what, k.rate))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// perRoom names the manager's requests in the window per room made, most first.
func (w window) perRoom(rooms, n int) string {
	if len(w.requestCounts) == 0 {
		return "none"
	}
	type kind struct {
		what  string
		count float64
	}
	var kinds []kind
	for what, count := range w.requestCounts {
		kinds = append(kinds, kind{what, count / float64(max(rooms, 1))})
	}
	slices.SortFunc(kinds, func(a, b kind) int { return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.what, b.what)) })
	var parts []string
	for _, k := range kinds[:min(n, len(kinds))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", k.what, k.count))
	}
	return strings.Join(parts, ", ")
}

// series is the manager's series of family for the room name, or an empty one.
func series(s sample, family, name string) *dto.Metric {
	for _, m := range s.families[family].GetMetric() {
		if label(m, "name") == name {
			return m
		}
	}
	return &dto.Metric{}
}

// admitted is how many the rooms admitted in the window, by the manager's herdgate_admitted_total.
func (w window) admitted(rooms []string) float64 {
	var n float64
	for _, r := range rooms {
		n += series(w.after, "herdgate_admitted_total", r).GetCounter().GetValue() - series(w.before, "herdgate_admitted_total", r).GetCounter().GetValue()
	}
	return n
}

// lagP99 merges the rooms' herdgate_tick_lag_seconds observations made in the window and returns their
// 99th percentile, interpolated within its bucket as Prometheus' histogram_quantile does, and the
// bucket's upper bound.
func (w window) lagP99(rooms []string) (estimate, bound time.Duration, ticks uint64) {
	var bounds []float64
	var counts []uint64
	for _, r := range rooms {
		now, then := series(w.after, "herdgate_tick_lag_seconds", r).GetHistogram(), series(w.before, "herdgate_tick_lag_seconds", r).GetHistogram()
		ticks += now.GetSampleCount() - then.GetSampleCount()
		for i, b := range now.GetBucket() {
			if len(bounds) <= i {
				bounds, counts = append(bounds, b.GetUpperBound()), append(counts, 0)
			}
			var earlier uint64
			if i < len(then.GetBucket()) {
				earlier = then.GetBucket()[i].GetCumulativeCount()
			}
			counts[i] += b.GetCumulativeCount() - earlier
		}
	}
	if ticks == 0 {
		return 0, 0, 0
	}
	rank := 0.99 * float64(ticks)
	lower, below := 0.0, uint64(0)
	for i, c := range counts {
		if float64(c) >= rank {
			in := float64(c - below)
			at := lower + (bounds[i]-lower)*(rank-float64(below))/math.Max(in, 1)
			return seconds(at), seconds(bounds[i]), ticks
		}
		lower, below = bounds[i], c
	}
	return time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), ticks
}

// lateTicks counts the rooms' ticks in the window whose lag passed the histogram bucket bound over.
func (w window) lateTicks(rooms []string, over time.Duration) (late, ticks uint64) {
	for _, r := range rooms {
		now, then := series(w.after, "herdgate_tick_lag_seconds", r).GetHistogram(), series(w.before, "herdgate_tick_lag_seconds", r).GetHistogram()
		n := now.GetSampleCount() - then.GetSampleCount()
		ticks += n
		for i, b := range now.GetBucket() {
			if seconds(b.GetUpperBound()) < over {
				continue
			}
			var earlier uint64
			if i < len(then.GetBucket()) {
				earlier = then.GetBucket()[i].GetCumulativeCount()
			}
			late += n - (b.GetCumulativeCount() - earlier)
			break
		}
	}
	return late, ticks
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
