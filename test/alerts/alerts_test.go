// Package alerts tests herdgate's Prometheus alerts (charts/herdgate/files/alerts.yaml) with
// Prometheus' own promtool, and the chart's PrometheusRule that carries them.
package alerts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/herdgate/herdgate/test/testenv"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type unitTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func paths(t *testing.T) (root, rules string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root, filepath.Join(root, "charts", "herdgate", "files", "alerts.yaml")
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found; run 'make toolchain' (Debian package prometheus)")
	}
	return path
}

// TestAlertRulesAreValidAndFireAndResolve: promtool accepts the rules, and its unit tests
// (alerts.test.yaml) fire and resolve every alert on synthetic series.
func TestAlertRulesAreValidAndFireAndResolve(t *testing.T) {
	_, rules := paths(t)
	tool := promtool(t)
	run(t, tool, "check", "rules", rules)
	run(t, tool, "test", "rules", "alerts.test.yaml")
}

// TestEveryAlertIsTestedAndHasARunbook: an alert without a unit test that fires it, or without its
// runbook in docs/runbooks, is a defect.
func TestEveryAlertIsTestedAndHasARunbook(t *testing.T) {
	root, rules := paths(t)
	var rf ruleFile
	readYAML(t, rules, &rf)
	var ut unitTests
	readYAML(t, "alerts.test.yaml", &ut)
	fired, resolved := map[string]bool{}, map[string]bool{}
	for _, test := range ut.Tests {
		for _, a := range test.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			} else {
				resolved[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			n++
			if !fired[r.Alert] || !resolved[r.Alert] {
				t.Errorf("%s: the unit tests fire it %t and see it quiet %t; want both", r.Alert, fired[r.Alert], resolved[r.Alert])
			}
			const base = "https://github.com/herdgate/herdgate/blob/main/"
			url := r.Annotations["runbook_url"]
			if want := base + "docs/runbooks/" + r.Alert + ".md"; url != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, url, want)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, strings.TrimPrefix(url, base))); err != nil {
				t.Errorf("%s: its runbook is missing: %v", r.Alert, err)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
		}
	}
	if n < 9 {
		t.Fatalf("%d alerts, want at least the nine of the operations pack", n)
	}
}

// TestTheChartCarriesTheRules: alerts.enabled renders a PrometheusRule whose groups are the rule file,
// as Prometheus reads it (the rules' own templates untouched).
func TestTheChartCarriesTheRules(t *testing.T) {
	root, rules := paths(t)
	helm, err := testenv.Helm()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HELM_CACHE_HOME", t.TempDir())
	t.Setenv("HELM_CONFIG_HOME", t.TempDir())
	t.Setenv("HELM_DATA_HOME", t.TempDir())
	chart := filepath.Join(root, "charts", "herdgate")
	out := run(t, helm, "template", "hg", chart, "--set", "redis.url=redis://redis:6379",
		"--set", "alerts.enabled=true", "--set", "alerts.labels.release=prometheus")
	var rendered map[string]any
	for _, doc := range strings.Split(out, "\n---") {
		if strings.Contains(doc, "\nkind: PrometheusRule") {
			if err := yaml.Unmarshal([]byte(doc), &rendered); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rendered == nil {
		t.Fatalf("alerts.enabled rendered no PrometheusRule:\n%s", out)
	}
	if labels := rendered["metadata"].(map[string]any)["labels"].(map[string]any); labels["release"] != "prometheus" {
		t.Errorf("the PrometheusRule's labels %v lack alerts.labels", labels)
	}
	var file map[string]any
	readYAML(t, rules, &file)
	if !reflect.DeepEqual(rendered["spec"], file) {
		t.Errorf("the PrometheusRule's spec is not the rule file:\n%v\n%v", rendered["spec"], file)
	}
	if off := run(t, helm, "template", "hg", chart, "--set", "redis.url=redis://redis:6379"); strings.Contains(off, "PrometheusRule") {
		t.Error("the default values render a PrometheusRule")
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
