package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/kubernetes"

	"github.com/herdgate/herdgate/test/testenv"
)

// processes are the programs a level measures, by their process IDs.
type processes struct {
	manager, redis, apiserver, etcd int
}

// sample is what the processes had used, and what the manager and the API server had counted, at one
// moment. Two samples make a window.
type sample struct {
	// at is when the sample began and doneAt when it ended; cpu and cpuDone are what the processes
	// had used by then.
	at, doneAt time.Time
	// scrapedAt is when the manager's metrics were asked for: the moment its counters are of.
	scrapedAt       time.Time
	cpu, cpuDone    cpuUsed
	managerRSS      int64
	redisCommands   int64
	apiStatusWrites float64
	// requestsBy counts the requests the API server answered, and benchBy those the bench sent, by
	// "VERB resource[/subresource]" (watches left out: they stay open).
	requestsBy, benchBy map[string]float64
	families            map[string]*dto.MetricFamily // the manager's metrics
}

// cpuUsed is the CPU the processes had used so far.
type cpuUsed struct {
	manager, redis, apiserver, etcd time.Duration
}

// sampler takes samples of one manager's world.
type sampler struct {
	procs processes
	rdb   redis.UniversalClient
	api   *kubernetes.Clientset
	// bench counts the requests of the bench's own clients.
	bench      *requestCounter
	metricsURL string
	pprofURL   string // the manager's /debug/pprof, if it serves one
}

// take reads the processes' CPU, then the counters and the manager's metrics, then the CPU again:
// reading the metrics costs the manager and the API server CPU of their own, which a window leaves
// out (between), and which the sample keeps as what one scrape cost.
func (s *sampler) take(ctx context.Context) (sample, error) {
	out := sample{at: time.Now()}
	if err := s.readCPU(&out.cpu); err != nil {
		return out, err
	}
	if err := s.readCounters(ctx, &out); err != nil {
		return out, err
	}
	out.doneAt = time.Now()
	return out, s.readCPU(&out.cpuDone)
}

func (s *sampler) readCPU(out *cpuUsed) error {
	for _, p := range []struct {
		pid int
		cpu *time.Duration
	}{{s.procs.manager, &out.manager}, {s.procs.redis, &out.redis}, {s.procs.apiserver, &out.apiserver}, {s.procs.etcd, &out.etcd}} {
		st, ok := testenv.ReadProcStat(p.pid)
		if !ok {
			return fmt.Errorf("process %d is gone", p.pid)
		}
		*p.cpu = st.CPU
	}
	return nil
}

func (s *sampler) readCounters(ctx context.Context, out *sample) error {
	var err error
	if out.managerRSS, err = residentBytes(s.procs.manager); err != nil {
		return err
	}
	info, err := s.rdb.InfoMap(ctx, "stats").Result()
	if err != nil {
		return err
	}
	if out.redisCommands, err = strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64); err != nil {
		return fmt.Errorf("reading Redis' total_commands_processed: %w", err)
	}
	if err := s.countRequests(ctx, out); err != nil {
		return err
	}
	// The manager gathers its metrics as the request comes in: its counters are of this moment.
	out.scrapedAt = time.Now()
	out.families, err = scrape(ctx, s.metricsURL)
	return err
}

// countRequests reads the API server's apiserver_request_total: every request it has answered, by
// verb, resource and subresource.
func (s *sampler) countRequests(ctx context.Context, out *sample) error {
	raw, err := s.api.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("reading the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	out.requestsBy = map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		verb, resource := label(m, "verb"), label(m, "resource")
		if verb == "WATCH" || verb == "CONNECT" || resource == "" {
			continue
		}
		what := verb + " " + resource
		if sub := label(m, "subresource"); sub != "" {
			what += "/" + sub
		}
		n := m.GetCounter().GetValue()
		out.requestsBy[what] += n
		if isWrite(what) && resource == "waitingqueues" && label(m, "subresource") == "status" {
			out.apiStatusWrites += n
		}
	}
	// Taken after the API server's count, so that the bench's own read of it is in neither.
	out.benchBy = s.bench.snapshot()
	return nil
}

// residentBytes is a process's resident memory (VmRSS).
func residentBytes(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for process %d", pid)
}

// childNamed finds the child process of this one whose command is name: the control plane's
// kube-apiserver and etcd, which envtest starts.
func childNamed(name string) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, path := range dirs {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		fields := bytes.Fields(stat[end+1:])
		if string(stat[open+1:end]) != name || len(fields) < 2 || string(fields[1]) != strconv.Itoa(os.Getpid()) {
			continue
		}
		return strconv.Atoi(string(bytes.Fields(stat)[0]))
	}
	return 0, fmt.Errorf("no child process named %s", name)
}

// profile records the manager's CPU for d into file.
func (s *sampler) profile(ctx context.Context, d time.Duration, file string) error {
	url := fmt.Sprintf("%s/profile?seconds=%d", s.pprofURL, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(res.Body)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

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
