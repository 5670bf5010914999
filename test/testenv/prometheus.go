package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Prometheus is a Prometheus server (Debian's) scraping the targets a test names, every second, with
// its storage in a folder of its own.
type Prometheus struct {
	*Process
	// URL is its HTTP API's base, http://127.0.0.1:<port>.
	URL string
}

// ScrapeJob is one job of a Prometheus: the addresses (host:port) whose /metrics it scrapes.
type ScrapeJob struct {
	Name    string
	Targets []string
}

// StartPrometheus runs prometheus with its storage and config in dir, scraping the jobs every
// second, and waits until it is ready.
func StartPrometheus(dir string, jobs ...ScrapeJob) (*Prometheus, error) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		return nil, fmt.Errorf("prometheus not found; run 'make toolchain' (Debian package prometheus): %w", err)
	}
	var conf strings.Builder
	conf.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
	for _, j := range jobs {
		quoted := make([]string, len(j.Targets))
		for i, t := range j.Targets {
			quoted[i] = fmt.Sprintf("%q", t)
		}
		fmt.Fprintf(&conf, "  - job_name: %q\n    static_configs:\n      - targets: [%s]\n", j.Name, strings.Join(quoted, ", "))
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	cmd := exec.Command("prometheus", "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	p, err := startProcess(cmd)
	if err != nil {
		return nil, err
	}
	prom := &Prometheus{Process: p, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := http.Get(prom.URL + "/-/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return prom, nil
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			out, _ := os.ReadFile(logs.Name())
			return nil, fmt.Errorf("prometheus was not ready within 30 s:\n%s", out)
		}
	}
}

// Series is one series of a query's answer: its labels and its values (NaN and ±Inf as Prometheus
// writes them).
type Series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// QueryRange evaluates expr at every step from start to end.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	q := url.Values{"query": {expr}, "start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(end.Unix())}, "step": {step.String()}}
	var answer struct {
		Result []Series `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query_range?"+q.Encode(), &answer); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	return answer.Result, nil
}

// LabelValues answers the values label takes in the series match selects.
func (p *Prometheus) LabelValues(ctx context.Context, label, match string) ([]string, error) {
	var values []string
	if err := p.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values?"+url.Values{"match[]": {match}}.Encode(), &values); err != nil {
		return nil, fmt.Errorf("label_values(%s, %s): %w", match, label, err)
	}
	return values, nil
}

// get reads the data of one answer of Prometheus' HTTP API into data.
func (p *Prometheus) get(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var envelope struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&envelope); err != nil {
		return fmt.Errorf("prometheus answered %s: %w", res.Status, err)
	}
	if envelope.Status != "success" {
		return fmt.Errorf("prometheus answered %s: %s", res.Status, envelope.Error)
	}
	return json.Unmarshal(envelope.Data, data)
}
