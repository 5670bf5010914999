// Command demo runs a whole herdgate waiting room on this machine and sends a herd of 500 virtual
// visitors through it. `make demo` (test/demo/run.sh) runs it on the real single-node cluster of
// hack/node.sh where the node can run: the chart installed with Helm, the orders service and the
// proxy as pods, the herd through the proxy's Service (--on-node, inside the node). Elsewhere it runs
// a local control plane, redis-server, the manager, the orders service and the proxy as local
// processes on loopback ports. `make demo ARGS=--once` exits after the herd; Ctrl-C stops everything
// and removes every temporary file.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/herd"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

func main() {
	once := flag.Bool("once", false, "exit after the herd instead of serving until Ctrl-C")
	visitors := flag.Int("visitors", 500, "virtual visitors in the herd")
	onNode := flag.Bool("on-node", false, "run on the node of hack/node.sh; the demo runs inside it (test/demo/run.sh)")
	gateway := flag.String("gateway", "", "put the room in Gateway mode behind a real gateway configured as docs/guides/gateways.md says: nginx or traefik")
	herdOnly := flag.Bool("herd-only", false, "with --on-node: send one more herd through the room an open demo serves, and exit")
	through := flag.String("through", "", "with --herd-only: the URL the herd goes through (default: the proxy's Service)")
	hostPort := flag.Int("host-port", 8080, "with --on-node: the host's loopback port the open demo forwards to the room, for a browser")
	flag.Parse()
	if *gateway != "" && !slices.Contains(gateways, *gateway) {
		fmt.Fprintf(os.Stderr, "demo: flag --gateway: %q is not one of %v\n", *gateway, gateways)
		os.Exit(2)
	}
	if (*herdOnly || *through != "") && !*onNode {
		fmt.Fprintln(os.Stderr, "demo: flags --herd-only and --through need --on-node (hack/node.sh exec bin/demo --on-node --herd-only)")
		os.Exit(2)
	}
	opts := options{once: *once, visitors: *visitors, gateway: *gateway, herdOnly: *herdOnly, through: *through, hostPort: *hostPort}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *onNode {
		err = runOnNode(ctx, opts)
	} else {
		err = run(ctx, opts)
	}
	stop()
	if errors.Is(err, context.Canceled) {
		say("Stopped; everything the demo started is gone")
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// options are the demo's flags.
type options struct {
	once     bool
	visitors int
	// gateway, when set, is the gateway in front of a room in Gateway mode.
	gateway string
	// herdOnly sends a herd through the room an open demo serves (through, when set); hostPort is
	// where the open demo lets the host's browser in.
	herdOnly bool
	through  string
	hostPort int
}

func say(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

// demo holds what the run started, to stop it in reverse order.
type demo struct {
	dir   string
	stops []func()
	root  string
	bin   string
	env   []string
}

func (d *demo) cleanup() {
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
	_ = os.RemoveAll(d.dir)
}

// start runs a binary of bin/ with its output in the demo folder.
func (d *demo) start(name string, args ...string) error {
	logPath := filepath.Join(d.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(d.bin, name), args...)
	cmd.Env = append(os.Environ(), d.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	d.stops = append(d.stops, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
	return nil
}

func (d *demo) kubectl(args ...string) (string, error) {
	kubectl, err := testenv.Kubectl()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(kubectl, args...)
	cmd.Env = append(os.Environ(), d.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func run(ctx context.Context, opts options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "herdgate-demo-")
	if err != nil {
		return err
	}
	d := &demo{dir: dir, root: root, bin: filepath.Join(root, "bin")}
	defer d.cleanup()

	kubeVersion, err := testenv.KubeVersion()
	if err != nil {
		return err
	}
	say("Starting a local control plane (etcd, kube-apiserver %s)", kubeVersion)
	cp, err := controlplane.Start(controlplane.Options{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}})
	if err != nil {
		return err
	}
	d.stops = append(d.stops, func() { _ = cp.Stop() })
	kubeconfigPath, err := cp.WriteKubeconfig("demo", dir)
	if err != nil {
		return err
	}
	d.env = []string{"KUBECONFIG=" + kubeconfigPath}
	if err := ctx.Err(); err != nil {
		return err
	}

	say("Starting redis-server")
	redis, err := testenv.NewRedis(dir)
	if err != nil {
		return err
	}
	d.stops = append(d.stops, redis.Stop)

	backendPort, proxyPort, err := ports()
	if err != nil {
		return err
	}
	backend := fmt.Sprintf("http://127.0.0.1:%d", backendPort)
	say("Starting the orders service on %s: %d connections, %s per order, 30 s pool wait", backend, herd.PoolSize, herd.RequestLatency)
	if err := d.start("herd", "backend", fmt.Sprintf("--listen=127.0.0.1:%d", backendPort)); err != nil {
		return err
	}

	say("Starting the manager")
	if err := d.start("manager", "--redis-url="+redis.URL(), "--proxy-image=herdgate/demo:local",
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"); err != nil {
		return err
	}

	say("Applying config/samples (the reference queue) with its upstream pointed at the orders service")
	sample, err := sampleQueue(filepath.Join(root, "config", "samples", "herdgate_v1alpha1_waitingqueue.yaml"), backend, opts.gateway)
	if err != nil {
		return err
	}
	samplePath := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(samplePath, sample, 0o600); err != nil {
		return err
	}
	applied, err := d.kubectl("apply", "-f", samplePath)
	if err != nil {
		return err
	}
	fmt.Print(applied)
	if err := waitFor(ctx, "the manager to reconcile the queue", func() bool {
		out, err := d.kubectl("get", "secret", "orders-herdgate-secret", "-o", "name")
		return err == nil && strings.TrimSpace(out) != ""
	}); err != nil {
		return err
	}

	// In a pod the key comes mounted from the queue's Secret; here the demo puts it where the proxy reads it.
	encodedKey, err := d.kubectl("get", "secret", "orders-herdgate-secret", "-o", "jsonpath={.data.hmac-key}")
	if err != nil {
		return err
	}
	hmacKey, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encodedKey))
	if err != nil {
		return fmt.Errorf("decoding the queue's HMAC key: %w", err)
	}
	keyPath := filepath.Join(dir, "hmac-key")
	if err := os.WriteFile(keyPath, hmacKey, 0o600); err != nil {
		return err
	}

	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	say("Starting the admission proxy on %s", proxy)
	if err := d.start("herdgate-proxy", "--waitingqueue=default/orders", "--kubeconfig="+kubeconfigPath, "--hmac-key-file="+keyPath,
		"--redis-url="+redis.URL(), fmt.Sprintf("--listen=127.0.0.1:%d", proxyPort), "--metrics-listen=127.0.0.1:0", "--drain-delay=0s"); err != nil {
		return err
	}
	if err := waitFor(ctx, "the proxy", func() bool {
		res, err := http.Get(proxy + "/.herdgate/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, "the plan in the queue's status", func() bool {
		out, err := d.kubectl("get", "wq", "orders", "-o", `jsonpath={.status.plan.batchSize}`)
		return err == nil && out == "14"
	}); err != nil {
		return err
	}
	out, err := d.kubectl("get", "wq")
	if err != nil {
		return err
	}
	fmt.Print(out)
	// This control plane runs no pods: the queue says its proxy Deployment has none ready, which is
	// true; the proxy that serves the herd is the local process started above.
	available, err := d.kubectl("get", "wq", "orders", "-o", `jsonpath={.status.conditions[?(@.type=="ProxyAvailable")].message}`)
	if err != nil {
		return err
	}
	say("ProxyAvailable: %s (no node runs pods here; the proxy serving the herd is the local process on %s)", available, proxy)
	plan, err := d.kubectl("get", "wq", "orders", "-o", "jsonpath={.status.plan}")
	if err != nil {
		return err
	}
	say("Plan: %s", plan)

	target := proxy
	if opts.gateway != "" {
		say("Starting %s in front of the room, configured as docs/guides/gateways.md says", opts.gateway)
		url, stop, err := startGateway(ctx, opts.gateway, dir, strings.TrimPrefix(proxy, "http://"), strings.TrimPrefix(backend, "http://"))
		if err != nil {
			return err
		}
		d.stops = append(d.stops, stop)
		target = url
	}
	say("Sending a herd of %d visitors at once through %s: enter, poll as told, order with the pass", opts.visitors, target)
	if _, err := sendHerd(ctx, target, backend, opts, planOf(d.kubectl)); err != nil {
		return err
	}
	if out, err = d.kubectl("get", "wq"); err == nil {
		fmt.Print(out)
	}

	if opts.once {
		return nil
	}
	say("The waiting room stays open: visit %s/.herdgate/?return=/ in a browser", proxy)
	say("Logs are in %s. Press Ctrl-C to stop; everything started here stops and its files go", dir)
	<-ctx.Done()
	fmt.Println()
	say("Stopping")
	return nil
}

// sampleQueue is config/samples' queue in the default namespace; with an upstream, sent there
// instead of to the orders Service, and with a gateway, enforced by it.
func sampleQueue(path, upstream, gateway string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := yaml.UnmarshalStrict(raw, wq); err != nil {
		return nil, err
	}
	wq.Namespace = "default"
	if upstream != "" {
		wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To(upstream)}
	}
	if gateway != "" {
		wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway
	}
	return yaml.Marshal(wq)
}

// planOf reads the admissions per second the queue orders plans, with kubectl; 0 when unknown.
func planOf(kubectl func(args ...string) (string, error)) float64 {
	out, err := kubectl("get", "wq", "orders", "-o", "jsonpath={.status.plan.admissionsPerSecond}")
	if err != nil {
		return 0
	}
	plan, _ := strconv.ParseFloat(strings.TrimSpace(out), 64)
	return plan
}

func ports() (int, int, error) {
	a, err := testenv.FreePort()
	if err != nil {
		return 0, 0, err
	}
	b, err := testenv.FreePort()
	return a, b, err
}

func waitFor(ctx context.Context, what string, ok func() bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// sendHerd resets the orders service at backend, sends visitors through target at once and prints
// the results table; through a gateway, it also sends orders without a pass meanwhile and says what
// the gateway's room did against plan.
func sendHerd(ctx context.Context, target, backend string, opts options, plan float64) (herd.Results, error) {
	reset, err := http.Post(backend+"/reset", "", nil)
	if err != nil {
		return herd.Results{}, err
	}
	_ = reset.Body.Close()
	p := &probes{}
	probeCtx, stopProbes := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		if opts.gateway != "" {
			p.run(probeCtx, target, 1000)
		}
	}()
	results := herd.Run(ctx, herd.Scenario{Name: "Demo herd", Visitors: opts.visitors, Target: target, OrderPath: "/api/v1/orders", GiveUp: 5 * time.Minute})
	stopProbes()
	<-probed
	if err := ctx.Err(); err != nil {
		return results, err
	}
	stats, err := backendStats(backend)
	if err != nil {
		return results, err
	}
	fmt.Println()
	herd.Summary(os.Stdout, herd.RunResult{RunSpec: herd.RunSpec{Test: "demo", Visitors: opts.visitors, Batch: 14}, Visitors: results, Backend: stats})
	fmt.Println()
	if opts.gateway != "" {
		return results, gatewaySummary(opts.gateway, plan, results, stats, p)
	}
	return results, nil
}

func backendStats(url string) (herd.BackendStats, error) {
	res, err := http.Get(url + "/stats")
	if err != nil {
		return herd.BackendStats{}, err
	}
	defer res.Body.Close()
	s := herd.BackendStats{}
	return s, json.NewDecoder(res.Body).Decode(&s)
}
