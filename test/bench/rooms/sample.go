package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
