// Package node drives the real single-node cluster of hack/node.sh: it installs the chart, the
// stand-in orders service and WaitingQueues on it, and its suite drills the gate under faults. Its
// code runs inside the node's network namespace (`hack/node.sh exec`), where the API server, the pods
// and the Services are reachable; test/node/run.sh starts the node, runs the suite and stops it.
package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/testenv"
)

// Names the node and the chart give things; they match hack/node.sh and the Makefile's images.
const (
	// InsideEnv is set by test/node/run.sh for the suite, which runs inside the node.
	InsideEnv = "HERDGATE_NODE"
	// Release and Namespace of the chart's installation.
	Release   = "herdgate"
	Namespace = "herdgate-system"
	// WorkloadImage runs `herd backend`, the stand-in orders service.
	WorkloadImage = "ghcr.io/herdgate/herd:0.1.0"
)

// Inside says whether this process runs inside the node, with its kubeconfig.
func Inside() bool { return os.Getenv(InsideEnv) == "1" && os.Getenv("KUBECONFIG") != "" }

// Cluster runs kubectl and helm against the node.
type Cluster struct {
	Root    string // the repository, for the chart and bin/
	kubectl string
	helm    string
}

// Connect finds kubectl and helm; KUBECONFIG names the node's API server.
func Connect() (*Cluster, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	kubectl, err := testenv.Kubectl()
	if err != nil {
		return nil, err
	}
	helm := os.Getenv("HERDGATE_HELM")
	if helm == "" {
		matches, _ := filepath.Glob(filepath.Join(root, "bin", "helm-*"))
		if len(matches) == 0 {
			return nil, fmt.Errorf("no helm: set HERDGATE_HELM or run make toolchain")
		}
		helm = matches[len(matches)-1]
	}
	return &Cluster{Root: root, kubectl: kubectl, helm: helm}, nil
}

func (c *Cluster) run(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Kubectl runs kubectl with args.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, nil, c.kubectl, args...)
}

// Apply applies manifests given as YAML.
func (c *Cluster) Apply(ctx context.Context, manifest string) error {
	_, err := c.run(ctx, []byte(manifest), c.kubectl, "apply", "-f", "-")
	return err
}

// InstallChart installs charts/herdgate with its evaluation Redis and waits for its pods.
func (c *Cluster) InstallChart(ctx context.Context, set ...string) error {
	args := []string{"upgrade", "--install", Release, filepath.Join(c.Root, "charts", "herdgate"),
		"--namespace", Namespace, "--create-namespace", "--set", "redis.deploy=true", "--wait", "--timeout", "3m"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	_, err := c.run(ctx, nil, c.helm, args...)
	return err
}

// OrdersService is the stand-in orders service as a Deployment and its Service, in namespace ns.
func OrdersService(ns string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: orders, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: orders}}
  template:
    metadata: {labels: {app: orders}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: orders
        image: %[2]s
        imagePullPolicy: IfNotPresent
        args: [backend, --listen=:8080]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: http}, periodSeconds: 2}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: orders, namespace: %[1]s}
spec:
  selector: {app: orders}
  ports: [{name: http, port: 8080, targetPort: http}]
`, ns, WorkloadImage)
}

// Pod is what the drills read of a pod.
type Pod struct {
	Name     string
	UID      string
	Ready    bool
	Running  bool
	Restarts int32
	Deleting bool
}

// Pods lists the pods in ns that match the label selector.
func (c *Cluster) Pods(ctx context.Context, ns, selector string) ([]Pod, error) {
	out, err := c.Kubectl(ctx, "get", "pods", "-n", ns, "-l", selector, "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				UID               string  `json:"uid"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				Phase      string `json:"phase"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
				ContainerStatuses []struct {
					RestartCount int32 `json:"restartCount"`
				} `json:"containerStatuses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("reading pods: %w", err)
	}
	pods := make([]Pod, 0, len(list.Items))
	for _, it := range list.Items {
		p := Pod{Name: it.Metadata.Name, UID: it.Metadata.UID, Running: it.Status.Phase == "Running", Deleting: it.Metadata.DeletionTimestamp != nil}
		for _, cond := range it.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				p.Ready = true
			}
		}
		for _, cs := range it.Status.ContainerStatuses {
			p.Restarts += cs.RestartCount
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// WaitPodsReady waits until exactly n pods match the selector, all Running, Ready and not deleting.
func (c *Cluster) WaitPodsReady(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		pods, err := c.Pods(ctx, ns, selector)
		if err == nil {
			ready := 0
			for _, p := range pods {
				if p.Ready && p.Running && !p.Deleting {
					ready++
				}
			}
			if ready == n && len(pods) == n {
				return pods, nil
			}
		}
		select {
		case <-ctx.Done():
			out, _ := c.Kubectl(context.Background(), "get", "pods", "-n", ns, "-l", selector, "-o", "wide")
			return nil, fmt.Errorf("waiting for %d ready pods matching %s in %s: %w\n%s", n, selector, ns, ctx.Err(), out)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ServiceIP is the cluster IP of a Service.
func (c *Cluster) ServiceIP(ctx context.Context, ns, name string) (string, error) {
	out, err := c.Kubectl(ctx, "get", "service", "-n", ns, name, "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("service %s/%s has no cluster IP", ns, name)
	}
	return strings.TrimSpace(out), nil
}

// WaitQueueReady waits until the WaitingQueue's Ready condition is True.
func (c *Cluster) WaitQueueReady(ctx context.Context, ns, name string, timeout time.Duration) error {
	_, err := c.Kubectl(ctx, "wait", "-n", ns, "waitingqueue/"+name, "--for=condition=Ready", "--timeout="+timeout.String())
	return err
}

// WaitSpellOver waits until the WaitingQueue's last busy spell (status.lastBusy) is over and ended
// at or after since, and returns it.
func (c *Cluster) WaitSpellOver(ctx context.Context, ns, name string, since time.Time, timeout time.Duration) (herdgatev1alpha1.BusySpellStatus, error) {
	deadline := time.Now().Add(timeout)
	for {
		out, err := c.Kubectl(ctx, "get", "wq", "-n", ns, name, "-o", "jsonpath={.status.lastBusy}")
		// From scratch each time: a field the JSON leaves out (ongoing, once over) is its zero value.
		var spell herdgatev1alpha1.BusySpellStatus
		if err == nil && out != "" && json.Unmarshal([]byte(out), &spell) == nil && !spell.Ongoing && !spell.End.Time.Before(since.Truncate(time.Second)) {
			return spell, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return spell, fmt.Errorf("reading status.lastBusy of %s/%s: %w", ns, name, err)
			}
			return spell, fmt.Errorf("status.lastBusy of %s/%s is %q; want a spell over, ended at %s or later", ns, name, out, since.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return spell, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// LeaseHolder is the pod that holds the manager's leader election Lease.
func (c *Cluster) LeaseHolder(ctx context.Context) (string, error) {
	out, err := c.Kubectl(ctx, "get", "lease", "-n", Namespace, "herdgate-manager.herdgate.io", "-o", "jsonpath={.spec.holderIdentity}")
	if err != nil {
		return "", err
	}
	// controller-runtime names the holder <pod>_<uuid>.
	holder, _, _ := strings.Cut(strings.TrimSpace(out), "_")
	return holder, nil
}

// WaitAnswers waits until an HTTP server answers url, whatever the status: a Service whose pods are
// Ready is reachable only once kube-proxy has programmed its endpoints, at its next sync.
func WaitAnswers(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err == nil {
			_ = res.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never answered: %w", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
