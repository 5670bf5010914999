// Command herdgate-proxy is the admission proxy: the gate in front of a workload. It serves one
// WaitingQueue, watched in Kubernetes (--waitingqueue) or read from a file (--config), or the rooms of
// a shared proxy set (--proxy-set).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/admission/host"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type flags struct {
	waitingQueue, configFile, kubeconfig string
	proxySet, secretDir                  string
	hmacKeyFile, replica                 string
	redisURL, listen, metricsListen      string
	extAuthzListen, generatePassKeys     string
	drainDelay, shutdownTimeout          time.Duration
	pprof                                bool
}

// run serves until ctx ends; it returns 2 for bad flags or config, 1 when serving fails. Only
// --generate-pass-keys writes to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, format+"\n", a...)
		return 2
	}
	f, zapOpts, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	if f.generatePassKeys != "" {
		return generatePassKeys(f.generatePassKeys, stdout, stderr)
	}
	if msg := f.check(); msg != "" {
		return usage("%s", msg)
	}

	log := zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr))
	ctrl.SetLogger(log)
	queue.RouteClientLogs(log)

	// Config from a file is read and checked before anything listens.
	fileCfg, key, msg := f.source()
	if msg != "" {
		return usage("%s", msg)
	}
	var store *queue.Store
	if f.proxySet == "" { // a set's rooms name their Redis in its Secret
		failovers := queue.NewFailoverWatch()
		rdb, err := queue.NewClient(f.redisURL, queue.ClientOptions{ClientName: "herdgate-proxy", Failovers: failovers})
		if err != nil {
			if f.configFile != "" {
				return usage("flag --config: %s: redisURL: %v", f.configFile, err)
			}
			return usage("flag --redis-url: %v", err)
		}
		if f.configFile == "" && f.hmacKeyFile == "" {
			_ = rdb.Close()
			return usage("flag --hmac-key-file is required with --waitingqueue")
		}
		defer rdb.Close()
		store = queue.NewStore(rdb, queue.StoreOptions{Failovers: failovers})
		defer store.Close()
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return usage("flag --listen: %v", err)
	}
	var metricsLn net.Listener
	if f.metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", f.metricsListen); err != nil {
			return usage("flag --metrics-listen: %v", err)
		}
	}
	var extAuthzLn net.Listener
	if f.extAuthzListen != "" {
		if extAuthzLn, err = net.Listen("tcp", f.extAuthzListen); err != nil {
			return usage("flag --ext-authz-listen: %v", err)
		}
	}
	serve := func(rooms admission.Rooms) error {
		log.Info("Serving", "listen", ln.Addr().String())
		return front.Serve(ctx, rooms, front.ServerOptions{
			Listener: ln, MetricsListener: metricsLn, ExtAuthzListener: extAuthzLn, DrainDelay: f.drainDelay, ShutdownTimeout: f.shutdownTimeout, Log: log, Profiling: f.pprof,
		})
	}

	if f.proxySet != "" {
		return serveSet(ctx, f, key, serve, log)
	}
	if fileCfg != nil {
		room, err := admission.NewRoom(fileCfg, store, admission.Options{Log: log})
		if err != nil {
			return usage("flag --config: %v", err)
		}
		if err := serve(room); err != nil {
			log.Error(err, "Serving failed")
			return 1
		}
		return 0
	}
	return watchAndServe(ctx, f, key, store, serve, log)
}

// parseFlags reads the command line; false means to exit with code (help, or a flag error already
// printed).
func parseFlags(args []string, stderr io.Writer) (flags, zap.Options, int, bool) {
	f := flags{}
	fs := flag.NewFlagSet("herdgate-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.waitingQueue, "waitingqueue", "", "namespace/name of the WaitingQueue to serve, watched in Kubernetes")
	fs.StringVar(&f.configFile, "config", "", "config file to serve instead of a watched WaitingQueue (outside Kubernetes): redisURL, hmacKey, waitingQueue, and passKeys for JWT passes (see --generate-pass-keys)")
	fs.StringVar(&f.generatePassKeys, "generate-pass-keys", "", "print a passKeys line for a --config file whose queue signs JWT passes with this algorithm (ES256 or HS256), and exit")
	fs.StringVar(&f.proxySet, "proxy-set", "", "namespace/name of the shared proxy set whose rooms to serve, by host (spec.proxy.shared), watched in Kubernetes")
	fs.StringVar(&f.secretDir, "secret-dir", "", "directory holding the proxy set's Secret, as mounted, for --proxy-set (required with it)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig for --waitingqueue outside a cluster (default: in-cluster, then $KUBECONFIG)")
	fs.StringVar(&f.redisURL, "redis-url", os.Getenv("HERDGATE_REDIS_URL"), "Redis URL for --waitingqueue (default $HERDGATE_REDIS_URL)")
	fs.StringVar(&f.hmacKeyFile, "hmac-key-file", "", "file holding the queue's HMAC key, as mounted from its Secret, for --waitingqueue (required with it)")
	fs.StringVar(&f.replica, "replica", defaultReplica(), "name of this replica in its reports to the manager (default: the host name, the pod's name)")
	fs.StringVar(&f.listen, "listen", ":8080", "address that serves visitors")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":9090", "address that serves /metrics; empty disables it")
	fs.StringVar(&f.extAuthzListen, "ext-authz-listen", "", "address that serves Envoy's ext_authz check (gRPC) for gateways; empty disables it")
	fs.DurationVar(&f.drainDelay, "drain-delay", 5*time.Second, "how long readyz fails before shutdown stops accepting")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long shutdown waits for requests in flight")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's /debug/pprof/ profiles on the metrics address")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, zapOpts, 0, false
		}
		return f, zapOpts, 2, false
	}
	return f, zapOpts, 0, true
}

// check says what is wrong with the flags together, naming the flag; "" when nothing is.
func (f *flags) check() string {
	given := 0
	for _, v := range []string{f.waitingQueue, f.configFile, f.proxySet} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return "exactly one of --waitingqueue, --proxy-set or --config is required"
	}
	if f.proxySet != "" && f.secretDir == "" {
		return "flag --secret-dir is required with --proxy-set"
	}
	if f.drainDelay < 0 || f.shutdownTimeout <= 0 {
		return "flag --drain-delay must not be negative and --shutdown-timeout must be positive"
	}
	return ""
}

// source is what the proxy serves: the config of --config, read and checked (its Redis URL replaces
// --redis-url), or the WaitingQueue --waitingqueue names. A message says what is wrong, naming the
// flag.
func (f *flags) source() (*admission.Config, types.NamespacedName, string) {
	if f.configFile != "" {
		cfg, url, err := admission.LoadFile(f.configFile)
		if err != nil {
			return nil, types.NamespacedName{}, fmt.Sprintf("flag --config: %v", err)
		}
		f.redisURL = url
		return cfg, types.NamespacedName{}, ""
	}
	flagName, value := "waitingqueue", f.waitingQueue
	if f.proxySet != "" {
		flagName, value = "proxy-set", f.proxySet
	}
	ns, name, ok := strings.Cut(value, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, types.NamespacedName{}, fmt.Sprintf("flag --%s: %q is not namespace/name", flagName, value)
	}
	if f.proxySet != "" {
		return nil, types.NamespacedName{Namespace: ns, Name: name}, "" // each room's Redis URL is in the set's Secret
	}
	if f.redisURL == "" {
		return nil, types.NamespacedName{}, "flag --redis-url (or $HERDGATE_REDIS_URL) is required with --waitingqueue"
	}
	return nil, types.NamespacedName{Namespace: ns, Name: name}, ""
}

// watchAndServe serves the WaitingQueue key, applying its changes live. It serves from the start:
// until the first valid config it answers healthz and fails readyz, so a refused config never makes
// the pod exit.
func watchAndServe(ctx context.Context, f flags, key types.NamespacedName, store *queue.Store, serve func(admission.Rooms) error, log logr.Logger) int {
	restCfg, code := kubeConfig(f, log)
	if restCfg == nil {
		return code
	}
	proxy, err := admission.NewUnconfiguredRoom(key.Namespace, key.Name, store, admission.Options{Log: log, Replica: f.replica})
	if err != nil {
		return badFlag(log, "flag --waitingqueue: %v", err)
	}
	return serveWatched(ctx, proxy, serve, func(ctx context.Context) error {
		return host.WatchRoom(ctx, restCfg, key, host.WatchOptions{
			HMACKey: host.KeyFile(f.hmacKeyFile), Apply: proxy.SetConfig, Refuse: proxy.RefuseConfig, Log: log,
			// The operator mounts the copies of the values the queue refers to beside the key.
			Values: admission.SecretFiles(filepath.Dir(f.hmacKeyFile)),
		})
	}, log)
}

// serveSet serves the rooms of the shared proxy set key, each on the Redis its values in the set's
// Secret name; rooms on one Redis share its client.
func serveSet(ctx context.Context, f flags, key types.NamespacedName, serve func(admission.Rooms) error, log logr.Logger) int {
	restCfg, code := kubeConfig(f, log)
	if restCfg == nil {
		return code
	}
	stores := map[string]*queue.Store{}
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	set := admission.NewSet(log)
	return serveWatched(ctx, set, serve, func(ctx context.Context) error {
		return host.WatchSet(ctx, restCfg, key.Namespace, key.Name, set, host.SetWatchOptions{
			Dir: f.secretDir, Proxy: admission.Options{Log: log, Replica: f.replica}, Log: log,
			// Only the watch's goroutine asks, one room at a time.
			Store: func(url string) (*queue.Store, error) {
				if s, ok := stores[url]; ok {
					return s, nil
				}
				failovers := queue.NewFailoverWatch()
				rdb, err := queue.NewClient(url, queue.ClientOptions{ClientName: "herdgate-proxy", Failovers: failovers})
				if err != nil {
					return nil, err
				}
				s := queue.NewStore(rdb, queue.StoreOptions{Failovers: failovers})
				stores[url] = s
				return s, nil
			},
		})
	}, log)
}

// kubeConfig is the API server's configuration: --kubeconfig, or in-cluster, then $KUBECONFIG, then
// ~/.kube/config; nil and the exit code when there is none.
func kubeConfig(f flags, log logr.Logger) (*rest.Config, int) {
	restCfg, err := ctrl.GetConfig()
	if f.kubeconfig != "" {
		restCfg, err = clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	}
	if err != nil {
		log.Error(err, "No Kubernetes configuration (in-cluster, --kubeconfig or $KUBECONFIG)")
		return nil, 2
	}
	return restCfg, 0
}

// serveWatched serves rooms while watch keeps them in line with the API, until ctx ends or either
// fails.
func serveWatched(ctx context.Context, rooms admission.Rooms, serve func(admission.Rooms) error, watch func(context.Context) error, log logr.Logger) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() { watchErr <- watch(ctx) }()
	served := make(chan error, 1)
	go func() { served <- serve(rooms) }()
	var serveErr, watchFailed error
	select {
	case serveErr = <-served:
		cancel()
		watchFailed = <-watchErr
	case watchFailed = <-watchErr:
		cancel()
		serveErr = <-served
	}
	if watchFailed != nil {
		log.Error(watchFailed, "Watching the WaitingQueues failed")
	}
	if serveErr != nil {
		log.Error(serveErr, "Serving failed")
	}
	if watchFailed != nil || serveErr != nil {
		return 1
	}
	return 0
}

func badFlag(log logr.Logger, format string, a ...any) int {
	log.Error(fmt.Errorf(format, a...), "Bad flags")
	return 2
}

// defaultReplica is the host name, which in a pod is the pod's name.
func defaultReplica() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return name
}

// generatePassKeys prints the passKeys line of a config file: one key of the algorithm, signing
// from now. A file's keys do not rotate (the operator rotates a watched queue's).
func generatePassKeys(algorithm string, stdout, stderr io.Writer) int {
	alg := pass.Algorithm(algorithm)
	if alg != pass.ES256 && alg != pass.HS256 {
		fmt.Fprintf(stderr, "flag --generate-pass-keys: %q is neither ES256 nor HS256\n", algorithm)
		return 2
	}
	key, err := pass.GenerateKey(alg, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "flag --generate-pass-keys: %v\n", err)
		return 1
	}
	raw, err := (&pass.KeySet{Keys: []pass.Key{key}}).Marshal()
	if err != nil {
		fmt.Fprintf(stderr, "flag --generate-pass-keys: %v\n", err)
		return 1
	}
	// JSON is YAML; single quotes keep it one scalar (the key set holds no single quote).
	fmt.Fprintf(stdout, "passKeys: '%s'\n", raw)
	return 0
}
