// Command manager runs the herdgate operator: the WaitingQueue reconciler and, on the elected leader,
// the scheduler that admits visitors.
package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/internal/queue"
)

// parseNamespaces reads --namespaces: nil (every namespace) when empty.
func parseNamespaces(list string) (map[string]cache.Config, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	out := map[string]cache.Config{}
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		out[ns] = cache.Config{}
	}
	return out, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run starts the manager; it returns 2 for bad flags, 1 when the manager fails.
func run(args []string, stderr io.Writer) int {
	var (
		redisURL        string
		redisCAFile     string
		proxyImage      string
		leaderElect     bool
		leaderNamespace string
		metricsAddr     string
		probeAddr       string
		pprofAddr       string
		namespaces      string
		apiQPS          float64
		apiBurst        int
		workers         int
	)
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&redisURL, "redis-url", os.Getenv("HERDGATE_REDIS_URL"),
		"Redis URL of queues without spec.redis: redis://, rediss://, redis+cluster:// or redis+sentinel://host:26379,host2:26379/master (default $HERDGATE_REDIS_URL)")
	fs.StringVar(&redisCAFile, "redis-ca-file", "", "PEM file of the CA that signed the Redis servers' certificates (rediss://, rediss+cluster://, rediss+sentinel://)")
	fs.StringVar(&proxyImage, "proxy-image", "", "container image of the admission proxy (required)")
	fs.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so that one manager of several runs the scheduler")
	fs.StringVar(&leaderNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the manager's namespace)")
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.StringVar(&pprofAddr, "pprof-bind-address", "", "address that serves Go's /debug/pprof/ profiles; empty disables it")
	fs.StringVar(&namespaces, "namespaces", "", "comma-separated namespaces whose WaitingQueues the manager serves, watching and caching only them (default: every namespace)")
	// client-go's own defaults (20/30) hold back a manager with many rooms: each new room takes about
	// a dozen requests, two of them to WaitingQueues, and at 50 a second a thousand rooms made at
	// once waited 40 s for the WaitingQueue client alone
	// (docs/performance.md, "A thousand rooms on one manager"). The API server's priority and
	// fairness keeps it safe from a higher rate.
	fs.Float64Var(&apiQPS, "kube-api-qps", 200, "requests per second the manager sends the API server at most, on average, for each kind")
	fs.IntVar(&apiBurst, "kube-api-burst", 400, "requests the manager may send the API server at once above --kube-api-qps")
	fs.IntVar(&workers, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles,
		"how many WaitingQueues the manager reconciles at once; a reconcile mostly waits for the API server")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if proxyImage == "" {
		fmt.Fprintln(stderr, "flag --proxy-image is required")
		return 2
	}
	if apiQPS <= 0 {
		fmt.Fprintf(stderr, "flag --kube-api-qps: %v is not a positive rate\n", apiQPS)
		return 2
	}
	if apiBurst < 1 {
		fmt.Fprintf(stderr, "flag --kube-api-burst: %d is not a positive number of requests\n", apiBurst)
		return 2
	}
	if workers < 1 {
		fmt.Fprintf(stderr, "flag --max-concurrent-reconciles: %d is not a positive number of workers\n", workers)
		return 2
	}
	watched, err := parseNamespaces(namespaces)
	if err != nil {
		fmt.Fprintf(stderr, "flag --namespaces: %v\n", err)
		return 2
	}
	clientOpts, err := redisClientOptions(redisURL, redisCAFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	queue.RouteClientLogs(ctrl.Log)
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(herdgatev1alpha1.AddToScheme(scheme))

	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(apiQPS), apiBurst
	// Nothing reads the managed fields of a cached object, and they are a good part of each room's
	// objects in the cache (docs/performance.md, "A thousand rooms on one manager").
	cacheOptions := cache.Options{DefaultNamespaces: watched, DefaultTransform: cache.TransformStripManagedFields()}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "herdgate-manager.herdgate.io",
		LeaderElectionNamespace: leaderNamespace,
		// A stepping-down leader stops its scheduler before it lets go of the lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "Creating the manager")
		return 1
	}
	if _, err := controllers.Setup(mgr, controllers.Options{RedisURL: redisURL, ProxyImage: proxyImage, RedisClient: clientOpts,
		MaxConcurrentReconciles: workers}); err != nil {
		log.Error(err, "Setting up the controllers")
		return 1
	}
	if err := errors.Join(mgr.AddHealthzCheck("healthz", healthz.Ping), mgr.AddReadyzCheck("readyz", healthz.Ping)); err != nil {
		log.Error(err, "Adding the health and readiness checks")
		return 1
	}
	log.Info("Starting the manager", "leaderElection", leaderElect, "proxyImage", proxyImage, "namespaces", namespaces, "workers", workers)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Running the manager")
		return 1
	}
	return 0
}

// redisClientOptions are the options of the manager's Redis clients. It fails at start, naming the
// flag, on a URL no queue could use or a CA file without a certificate.
func redisClientOptions(redisURL, caFile string) (queue.ClientOptions, error) {
	opts := queue.ClientOptions{ClientName: "herdgate-manager"}
	if redisURL != "" {
		rdb, err := queue.NewClient(redisURL, opts)
		if err != nil {
			return opts, fmt.Errorf("flag --redis-url: %w", err)
		}
		_ = rdb.Close()
	}
	if caFile == "" {
		return opts, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return opts, fmt.Errorf("flag --redis-ca-file: %w", err)
	}
	opts.RootCAs = x509.NewCertPool()
	if !opts.RootCAs.AppendCertsFromPEM(pem) {
		return opts, fmt.Errorf("flag --redis-ca-file: %s holds no PEM certificate", caFile)
	}
	return opts, nil
}
