package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/test/testenv"
)

// serviceMonitorCRD stands in for the Prometheus Operator's CRD, so that the chart's ServiceMonitor
// can be applied to the test control plane.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

// prometheusRuleCRD stands in for the Prometheus Operator's PrometheusRule CRD, for alerts.enabled.
var prometheusRuleCRD = strings.NewReplacer("servicemonitors", "prometheusrules", "ServiceMonitorList", "PrometheusRuleList",
	"ServiceMonitor", "PrometheusRule", "servicemonitor", "prometheusrule").Replace(serviceMonitorCRD)

// podMonitorCRD stands in for the Prometheus Operator's PodMonitor CRD, for metrics.proxyPodMonitor.
var podMonitorCRD = strings.NewReplacer("servicemonitors", "podmonitors", "ServiceMonitorList", "PodMonitorList",
	"ServiceMonitor", "PodMonitor", "servicemonitor", "podmonitor").Replace(serviceMonitorCRD)

type tools struct {
	helm, kubectl, kubeconfig, chart, root string
}

func chartTools(t *testing.T) tools {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := testenv.Helm()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := testEnv.AddUser(envtest.User{Name: "chart-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return tools{helm: helm, kubectl: kubectl, kubeconfig: kubeconfig, chart: filepath.Join(root, "charts", "herdgate"), root: root}
}

func (tl tools) run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+tl.kubeconfig, "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// apply applies rendered manifests server-side, CRDs first, and fails the test on any error.
func (tl tools) apply(t *testing.T, manifests string) {
	t.Helper()
	var crds, rest []string
	for _, doc := range strings.Split(manifests, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if strings.Contains(doc, "\nkind: CustomResourceDefinition") || strings.HasPrefix(strings.TrimSpace(doc), "kind: CustomResourceDefinition") {
			crds = append(crds, doc)
		} else {
			rest = append(rest, doc)
		}
	}
	dir := t.TempDir()
	for i, group := range [][]string{crds, rest} {
		if len(group) == 0 {
			continue
		}
		path := filepath.Join(dir, []string{"crds.yaml", "rest.yaml"}[i])
		if err := os.WriteFile(path, []byte(strings.Join(group, "\n---")), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := tl.run(t, tl.kubectl, "apply", "--server-side", "--force-conflicts", "-f", path); err != nil {
			t.Fatalf("kubectl apply --server-side of the %s: %v\n%s", []string{"CRDs", "other objects"}[i], err, out)
		}
		if i == 0 {
			if out, err := tl.run(t, tl.kubectl, "wait", "--for=condition=Established", "--timeout=30s", "-f", path); err != nil {
				t.Fatalf("CRDs not established: %v\n%s", err, out)
			}
		}
	}
}

func TestHelmChart(t *testing.T) {
	tl := chartTools(t)
	ctx := context.Background()
	for _, ns := range []string{"hg-system", "herdgate-full"} {
		if err := client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("lint", func(t *testing.T) {
		if out, err := tl.run(t, tl.helm, "lint", "--strict", tl.chart, "--set", "redis.url=redis://redis:6379"); err != nil {
			t.Fatalf("helm lint: %v\n%s", err, out)
		}
	})

	t.Run("default values render and apply", func(t *testing.T) {
		out, err := tl.run(t, tl.helm, "template", "hg", tl.chart, "--namespace", "hg-system", "--set", "redis.url=redis://redis:6379")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		for _, want := range []string{"kind: CustomResourceDefinition", "helm.sh/resource-policy: keep", "kind: ClusterRole", "--leader-elect=true", "kind: Service\n",
			"kind: PodDisruptionBudget", "topologyKey: kubernetes.io/hostname"} {
			if !strings.Contains(out, want) {
				t.Errorf("rendered chart lacks %q", want)
			}
		}
		tl.apply(t, out)
	})

	t.Run("a Sentinel URL goes into the Redis Secret", func(t *testing.T) {
		url := "redis+sentinel://redis-node-0.redis-headless:26379,redis-node-1.redis-headless:26379/mymaster?sentinel_password=pw"
		// --set would split the URL at its commas; --set-literal takes it as it is.
		out, err := tl.run(t, tl.helm, "template", "hg", tl.chart, "--namespace", "hg-system", "--set-literal", "redis.url="+url)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		if !strings.Contains(out, "url: "+strconv.Quote(url)) {
			t.Errorf("the Redis Secret does not hold %s:\n%s", url, out)
		}
	})

	t.Run("one replica has no disruption budget, which would only block a node's drain", func(t *testing.T) {
		out, err := tl.run(t, tl.helm, "template", "hg", tl.chart, "--namespace", "hg-system", "--set", "redis.url=redis://redis:6379", "--set", "replicaCount=1")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		if strings.Contains(out, "kind: PodDisruptionBudget") {
			t.Error("replicaCount=1 renders a PodDisruptionBudget")
		}
	})

	t.Run("every option on renders and applies", func(t *testing.T) {
		tl.apply(t, serviceMonitorCRD)
		tl.apply(t, prometheusRuleCRD)
		tl.apply(t, podMonitorCRD)
		out, err := tl.run(t, tl.helm, "template", "full", tl.chart, "--namespace", "herdgate-full",
			"--set", "redis.deploy=true",
			"--set", "crds.keep=false",
			"--set", "replicaCount=3",
			"--set", "image.tag=1.2.3",
			"--set", "imagePullSecrets[0].name=regcred",
			"--set", "manager.logLevel=debug",
			"--set", "manager.extraArgs[0]=--redis-ca-file=/etc/ssl/redis.pem",
			"--set", "podAnnotations.team=checkout",
			"--set", "podLabels.tier=edge",
			"--set", "nodeSelector.kubernetes\\.io/os=linux",
			"--set", "tolerations[0].key=dedicated",
			"--set", "tolerations[0].operator=Exists",
			"--set", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
			"--set", "topologySpreadConstraints[0].maxSkew=2",
			"--set", "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
			"--set", "priorityClassName=system-cluster-critical",
			"--set", "metrics.serviceMonitor.enabled=true",
			"--set", "metrics.serviceMonitor.labels.release=prometheus",
			"--set", "alerts.enabled=true",
			"--set", "alerts.labels.release=prometheus",
			"--set", "metrics.proxyPodMonitor.enabled=true",
			"--set", "dashboards.enabled=true",
		)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		for _, want := range []string{"kind: ServiceMonitor", "honorLabels: true", "kind: PrometheusRule", "kind: PodMonitor", "grafana_dashboard: \"1\"", "alert: HerdgateQueueStuck", "name: full-herdgate-redis", "maxSkew: 2", "redis://full-herdgate-redis.herdgate-full.svc:6379", "herdgate:1.2.3", "regcred"} {
			if !strings.Contains(out, want) {
				t.Errorf("rendered chart lacks %q", want)
			}
		}
		if strings.Contains(out, "helm.sh/resource-policy") {
			t.Error("crds.keep=false still keeps the CRD")
		}
		tl.apply(t, out)
	})

	t.Run("bad values are refused with a clear message", func(t *testing.T) {
		cases := []struct {
			name string
			set  []string
			want string
		}{
			{"no Redis", nil, "redis: set redis.url, or redis.existingSecret.name, or redis.deploy=true"},
			{"two Redis sources", []string{"redis.url=redis://a:1", "redis.existingSecret.name=s"}, "set only one of redis.url and redis.existingSecret.name"},
			{"a typo", []string{"redis.url=redis://a:1", "redis.urll=redis://b:1"}, "urll"},
			{"a string for a number", []string{"redis.url=redis://a:1", "replicaCount=two"}, "replicaCount"},
			{"an unknown pull policy", []string{"redis.url=redis://a:1", "image.pullPolicy=Sometimes"}, "pullPolicy"},
			{"a URL that is not Redis", []string{"redis.url=http://u:s3cret-pw@a:1"}, "redis.url: not a Redis URL"},
			{"a Redis URL without a host", []string{"redis.url=redis://:s3cret-pw@"}, "redis.url: not a Redis URL"},
			{"a Redis URL with a port that is not a number", []string{"redis.url=redis://redis:port?password=s3cret-pw"}, "redis.url: not a Redis URL"},
			{"a Redis URL with an impossible port", []string{"redis.url=redis://u:s3cret-pw@r:99999"}, "redis.url: not a Redis URL"},
			{"a Redis URL on port 0", []string{"redis.url=redis://r:0"}, "redis.url: not a Redis URL"},
			{"a Redis Cluster node on an impossible port", []string{"redis.url=redis+cluster://a:7000?addr=b:65536"}, "redis.url: not a Redis URL"},
			{"a Redis URL with a space", []string{"redis.url=redis://red is:6379"}, "redis.url: not a Redis URL"},
			{"a Redis URL with a database that is not a number", []string{"redis.url=redis://redis:6379/zero"}, "redis.url: not a Redis URL"},
			// --set splits at commas unless they are escaped.
			{"a Sentinel URL without a master", []string{`redis.url=redis+sentinel://s1:26379\,s2:26379`}, "redis.url: not a Redis URL"},
			{"a Sentinel without a port", []string{`redis.url=redis+sentinel://s1:26379\,s2/mymaster`}, "redis.url: not a Redis URL"},
			{"a Sentinel on an impossible port", []string{"redis.url=rediss+sentinel://s1:65536/mymaster"}, "redis.url: not a Redis URL"},
			{"Redis twice", []string{"redis.url=redis://a:1", "redis.deploy=true"}, "redis.deploy=true runs its own Redis"},
			{"a memory limit that is no quantity", []string{"redis.url=redis://a:1", "manager.resources.limits.memory=lots"}, "manager/resources/limits/memory"},
			{"a negative CPU request", []string{"redis.url=redis://a:1", "manager.resources.requests.cpu=-1"}, "manager/resources/requests/cpu"},
			{"a resource no container has", []string{"redis.url=redis://a:1", "redis.resources.limits.gpu=1"}, "'gpu' not allowed"},
			{"a namespace name that is not one", []string{"redis.url=redis://a:1", "watchNamespaces[0]=Shop_Floor"}, "watchNamespaces/0"},
			{"a Secret name that is not one", []string{"redis.existingSecret.name=My_Secret"}, "redis/existingSecret/name"},
			{"alerts switched on with a word", []string{"redis.url=redis://a:1", "alerts.enabled=yes"}, "alerts/enabled"},
			{"dashboards switched on with a word", []string{"redis.url=redis://a:1", "dashboards.enabled=yes"}, "dashboards/enabled"},
			{"a dashboard namespace that is not one", []string{"redis.url=redis://a:1", "dashboards.namespace=Grafana_NS"}, "dashboards/namespace"},
			{"a dashboard label that is not a string", []string{"redis.url=redis://a:1", "dashboards.labels.grafana_dashboard=1"}, "dashboards/labels/grafana_dashboard"},
			{"a proxy scrape interval that is no duration", []string{"redis.url=redis://a:1", "metrics.proxyPodMonitor.interval=often"}, "metrics/proxyPodMonitor/interval"},
			{"a full name too long for a Service", []string{"redis.url=redis://a:1", "fullnameOverride=" + strings.Repeat("h", 56)}, "fullnameOverride"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				args := []string{"template", "bad", tl.chart}
				for _, s := range tc.set {
					args = append(args, "--set", s)
				}
				out, err := tl.run(t, tl.helm, args...)
				if err == nil {
					t.Fatalf("helm template accepted %v", tc.set)
				}
				if !strings.Contains(out, tc.want) {
					t.Fatalf("helm's error does not name %q:\n%s", tc.want, out)
				}
				if strings.Contains(out, "s3cret-pw") {
					t.Fatalf("helm's error repeats the password:\n%s", out)
				}
			})
		}
	})

	t.Run("the longest release name makes names that fit", func(t *testing.T) {
		release := strings.Repeat("r", 53) // Helm's own limit
		out, err := tl.run(t, tl.helm, "template", release, tl.chart, "--namespace", "hg-system", "--set", "redis.deploy=true")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		// Service names are DNS labels (63 characters at most); the API server checks every other name.
		for _, doc := range strings.Split(out, "\n---") {
			if !strings.Contains(doc, "\nkind: Service\n") {
				continue
			}
			for _, line := range strings.Split(doc, "\n") {
				if name, ok := strings.CutPrefix(line, "  name: "); ok && len(name) > 63 {
					t.Errorf("Service name %q is %d characters long", name, len(name))
				}
			}
		}
		tl.apply(t, out)
	})

	t.Run("kustomize config/default applies", func(t *testing.T) {
		out, err := tl.run(t, tl.kubectl, "kustomize", filepath.Join(tl.root, "config", "default"))
		if err != nil {
			t.Fatalf("kubectl kustomize: %v\n%s", err, out)
		}
		tl.apply(t, out)
	})
}
