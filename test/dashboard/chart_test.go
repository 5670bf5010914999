package dashboard

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestTheChartCarriesTheDashboard: dashboards.enabled renders a ConfigMap that Grafana's sidecar
// loads (labelled grafana_dashboard: "1", in the namespace asked for) holding the dashboard file as
// it is, its ${variables} untouched by the template.
func TestTheChartCarriesTheDashboard(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := testenv.Helm()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helm, "template", "hg", filepath.Join(root, "charts", "herdgate"), "--namespace", "hg-system",
		"--set", "redis.url=redis://redis:6379", "--set", "dashboards.enabled=true", "--set", "dashboards.namespace=monitoring",
		"--set", "dashboards.annotations.grafana_folder=Launches").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var cm *corev1.ConfigMap
	for doc := range strings.SplitSeq(string(out), "\n---") {
		if !strings.Contains(doc, "\nkind: ConfigMap\n") {
			continue
		}
		cm = &corev1.ConfigMap{}
		if err := yaml.Unmarshal([]byte(doc), cm); err != nil {
			t.Fatal(err)
		}
	}
	if cm == nil {
		t.Fatalf("dashboards.enabled renders no ConfigMap:\n%s", out)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "monitoring" || cm.Annotations["grafana_folder"] != "Launches" {
		t.Errorf("the ConfigMap is not where Grafana's sidecar looks: namespace %q, labels %v, annotations %v", cm.Namespace, cm.Labels, cm.Annotations)
	}
	_, raw := readDashboard(t)
	if cm.Data["herdgate.json"] != string(raw) {
		t.Error("the ConfigMap's herdgate.json differs from charts/herdgate/files/dashboard.json")
	}

	off, err := exec.Command(helm, "template", "hg", filepath.Join(root, "charts", "herdgate"), "--set", "redis.url=redis://redis:6379").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, off)
	}
	if strings.Contains(string(off), "grafana_dashboard") {
		t.Error("the chart renders the dashboard without dashboards.enabled")
	}
}
