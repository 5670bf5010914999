package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

// managerSample is what the manager and Redis had used, and the manager's metrics, at one moment.
type managerSample struct {
	at                  time.Time
	managerCPU, redisCP time.Duration
	peakRSS             int64
	// commands is INFO commandstats: the calls Redis served and the time it spent in them.
	commands map[string]testenv.CommandStat
	families map[string]*dto.MetricFamily
}

// commandStats reads INFO commandstats of the Redis at url, by command.
func commandStats(t *testing.T, url string) map[string]testenv.CommandStat {
	t.Helper()
	rdb, err := queue.NewClient(url, queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	stats, err := testenv.CommandStats(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

func sampleManager(t *testing.T, pid int, redis *testenv.Redis, metricsURL string) managerSample {
	t.Helper()
	s := managerSample{at: time.Now(), redisCP: redis.CPU(), commands: commandStats(t, redis.URL())}
	st, ok := testenv.ReadProcStat(pid)
	if !ok {
		t.Fatal("the manager is gone")
	}
	s.managerCPU = st.CPU
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			s.peakRSS = kb << 10
		}
	}
	res, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if s.families, err = parser.TextToMetricFamilies(res.Body); err != nil {
		t.Fatal(err)
	}
	return s
}

// phase is what happened between two samples.
type phase struct {
	seconds              float64
	ticks                float64
	managerCPU, redisCPU time.Duration
	// commands is what Redis served in the phase, by command; scripts the time its scripts took.
	commands map[string]testenv.CommandStat
	scripts  time.Duration
	// The reference queue's 99th percentiles (histogramP99), its ticks, the grid points they
	// made up for or dropped, and its admissions.
	refLag, refDuration             time.Duration
	refTicks, refMadeUp, refDropped float64
	refAdmitted                     float64
	overrideRate                    float64
	pings                           []time.Duration
	// oversleeps is how much later than asked the test's own 10 ms sleeps between the pings ended:
	// how much the machine held up a process that did nearly nothing.
	oversleeps []time.Duration
}

func (s managerSample) since(before managerSample) phase {
	p := phase{seconds: s.at.Sub(before.at).Seconds(), managerCPU: s.managerCPU - before.managerCPU, redisCPU: s.redisCP - before.redisCP,
		commands: map[string]testenv.CommandStat{}}
	for name, now := range s.commands {
		then := before.commands[name]
		if d := (testenv.CommandStat{Calls: now.Calls - then.Calls, Time: now.Time - then.Time}); d.Calls > 0 {
			p.commands[name] = d
		}
	}
	p.scripts = p.commands["evalsha"].Time + p.commands["eval"].Time
	for _, m := range s.families["herdgate_tick_duration_seconds"].GetMetric() {
		p.ticks += float64(m.GetHistogram().GetSampleCount()) - float64(findMetric(before, "herdgate_tick_duration_seconds", m).GetHistogram().GetSampleCount())
	}
	p.refLag = histogramP99(s, before, "herdgate_tick_lag_seconds", "reference")
	p.refDuration = histogramP99(s, before, "herdgate_tick_duration_seconds", "reference")
	p.refTicks = float64(seriesOf(s, "herdgate_tick_duration_seconds", "reference").GetHistogram().GetSampleCount() -
		seriesOf(before, "herdgate_tick_duration_seconds", "reference").GetHistogram().GetSampleCount())
	p.refMadeUp = missedDelta(s, before, "reference", "made_up")
	p.refDropped = missedDelta(s, before, "reference", "dropped")
	p.refAdmitted = counterDelta(s, before, "herdgate_admitted_total", "reference")
	p.overrideRate = counterDelta(s, before, "herdgate_admitted_total", "override") / p.seconds
	return p
}

// redisCommands lists what Redis served in the phase, the slowest in all first.
func (p phase) redisCommands() string {
	names := slices.Collect(maps.Keys(p.commands))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(p.commands[b].Time, p.commands[a].Time) })
	lines := make([]string, 0, len(names))
	for _, name := range names {
		c := p.commands[name]
		lines = append(lines, fmt.Sprintf("%s: %d calls, %s", name, c.Calls, c.Time))
	}
	return strings.Join(lines, "; ")
}

func (p phase) row(name string) string {
	perTick := func(d time.Duration) string {
		if p.ticks == 0 {
			return "-"
		}
		return (time.Duration(float64(d) / p.ticks)).Round(time.Microsecond).String()
	}
	return fmt.Sprintf("| %s | %.0f | %s | %s | %s | %s | %s | %.1f | %.0f / %.0f | %.0f | %s / %s / %s | %s / %s |", name, p.ticks/p.seconds,
		perTick(p.managerCPU), perTick(p.redisCPU), perTick(p.scripts), p.refLag, p.refDuration, p.refAdmitted/p.seconds, p.refMadeUp, p.refDropped,
		p.overrideRate, percentile(p.pings, 0.5), percentile(p.pings, 0.99), percentile(p.pings, 1), percentile(p.oversleeps, 0.99), percentile(p.oversleeps, 1))
}

// pingDuring sends a PING to Redis every 10 ms for d, as any other queue's call would meet the
// server, and returns the round trips and how much each sleep between them overslept.
func pingDuring(t *testing.T, url string, d time.Duration) (pings, oversleeps []time.Duration) {
	t.Helper()
	rdb, err := queue.NewClient(url, queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	const gap = 10 * time.Millisecond
	for end := time.Now().Add(d); time.Now().Before(end); {
		t0 := time.Now()
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		pings = append(pings, time.Since(t0))
		t1 := time.Now()
		time.Sleep(gap)
		oversleeps = append(oversleeps, time.Since(t1)-gap)
	}
	return pings, oversleeps
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(10 * time.Microsecond)
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// findMetric is the series of family that has m's labels in the sample s, or an empty one.
func findMetric(s managerSample, family string, m *dto.Metric) *dto.Metric {
	for _, o := range s.families[family].GetMetric() {
		if labelOf(o, "name") == labelOf(m, "name") && labelOf(o, "namespace") == labelOf(m, "namespace") {
			return o
		}
	}
	return &dto.Metric{}
}

func seriesOf(s managerSample, family, queueName string) *dto.Metric {
	for _, m := range s.families[family].GetMetric() {
		if labelOf(m, "name") == queueName {
			return m
		}
	}
	return &dto.Metric{}
}

func counterDelta(s, before managerSample, family, queueName string) float64 {
	return seriesOf(s, family, queueName).GetCounter().GetValue() - seriesOf(before, family, queueName).GetCounter().GetValue()
}

// histogramP99 is the 99th percentile of the observations made between the two samples, read as
// Prometheus' histogram_quantile reads it: linearly within the bucket that holds it. On doubling
// buckets the upper bound alone can be twice the value, and a phase holds so few of the reference
// queue's ticks that its p99 is the slowest of them (docs/performance.md, "A tick's cost follows whom it admits").
func histogramP99(s, before managerSample, family, queueName string) time.Duration {
	now, then := seriesOf(s, family, queueName).GetHistogram(), seriesOf(before, family, queueName).GetHistogram()
	total := float64(now.GetSampleCount() - then.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := 0.99 * total
	var lower, below float64
	for i, b := range now.GetBucket() {
		var earlier uint64
		if i < len(then.GetBucket()) {
			earlier = then.GetBucket()[i].GetCumulativeCount()
		}
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount()-earlier)
		if count >= rank {
			seconds := lower + (upper-lower)*(rank-below)/(count-below)
			return time.Duration(seconds * float64(time.Second)).Round(10 * time.Microsecond)
		}
		lower, below = upper, count
	}
	return time.Duration(1<<63 - 1)
}

// missedDelta is herdgate_ticks_missed_total{outcome} of queueName between the two samples.
func missedDelta(s, before managerSample, queueName, outcome string) float64 {
	value := func(s managerSample) float64 {
		for _, m := range s.families["herdgate_ticks_missed_total"].GetMetric() {
			if labelOf(m, "name") == queueName && labelOf(m, "outcome") == outcome {
				return m.GetCounter().GetValue()
			}
		}
		return 0
	}
	return value(s) - value(before)
}
