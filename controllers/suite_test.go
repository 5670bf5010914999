package controllers_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// Timeouts of every Eventually in this suite, kept in one place.
const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	// mainNamespace is the only namespace the suite's main manager watches; other specs run their
	// own managers in namespaces of their own.
	mainNamespace = "default"
	proxyImage    = "registry.example/herdgate:test"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	cfg       *rest.Config
	scheme    *runtime.Scheme
	k8sClient client.Client
	repoRoot  string
	redisSrv  *testenv.Redis
	redisRDB  *queue.Store
	ticks     = &tickLog{}
)

// managerLog is everything the managers of the suite logged, for the sweeps that look for a secret
// in every output.
var managerLog testenv.LockedBuffer

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(GinkgoWriter, &managerLog)), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	repoRoot, err = testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cp := controlplane.New(GinkgoT(), controlplane.Options{})
	testEnv, cfg, scheme, k8sClient = cp.Env, cp.Config, cp.Scheme, cp.Client

	dir, err := os.MkdirTemp("", "herdgate-controllers-redis-")
	Expect(err).NotTo(HaveOccurred())
	redisSrv, err = testenv.NewRedis(dir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { redisSrv.Stop(); _ = os.RemoveAll(dir) })
	rdb, err := queue.NewClient(redisSrv.URL(), queue.ClientOptions{})
	Expect(err).NotTo(HaveOccurred())
	redisRDB = queue.NewStore(rdb, queue.StoreOptions{})
	DeferCleanup(func() { redisRDB.Close(); _ = rdb.Close() })

	// The main manager runs as a user bound to nothing but the generated ClusterRole, so every spec
	// also proves that config/rbac grants what the manager needs.
	managerCfg := restrictedConfig("herdgate-manager")
	managerCfg.Wrap(managerWrites.wrap)
	startManager(ctx, managerOptions{namespaces: []string{mainNamespace}, onTick: ticks.add, restConfig: managerCfg})
})

// managerWrites counts the main manager's requests to the API server.
var managerWrites = &requestLog{}

// requestLog counts the requests a client sends, by method and path, and can hold each back for a
// while, as a loaded API server answers late.
type requestLog struct {
	mu     sync.Mutex
	counts map[string]int
	// answered counts the requests whose answer came back, by method and path: a write still on its
	// way may land after a change the test makes since, and be the write that change provokes.
	answered map[string]int
	// sent are the requests, oldest first, as "METHOD path".
	sent []string
	// statusPatches are the bodies of the status patches sent, by path.
	statusPatches map[string][][]byte
	// delay holds every request back this long (nanoseconds) before it is sent.
	delay atomic.Int64
}

func (c *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[r.Method+" "+r.URL.Path]++
		c.sent = append(c.sent, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status") && r.GetBody != nil {
			if body, err := r.GetBody(); err == nil {
				b, _ := io.ReadAll(body)
				if c.statusPatches == nil {
					c.statusPatches = map[string][][]byte{}
				}
				c.statusPatches[r.URL.Path] = append(c.statusPatches[r.URL.Path], b)
			}
		}
		c.mu.Unlock()
		if d := time.Duration(c.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		resp, err := rt.RoundTrip(r)
		c.mu.Lock()
		if c.answered == nil {
			c.answered = map[string]int{}
		}
		c.answered[r.Method+" "+r.URL.Path]++
		c.mu.Unlock()
		return resp, err
	})
}

// of is how many writes (any request but a read) to paths under prefix were answered so far.
func (c *requestLog) of(prefix string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.answered {
		if method, path, _ := strings.Cut(k, " "); method != http.MethodGet && method != http.MethodHead && strings.HasPrefix(path, prefix) {
			out[k] = n
		}
	}
	return out
}

// requests are the requests sent so far, oldest first, as "METHOD path".
func (c *requestLog) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// statusPatchesOf are the bodies of the status patches sent to path, oldest first.
func (c *requestLog) statusPatchesOf(path string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.statusPatches[path])
}

// count is how many requests of method went to paths under prefix so far.
func (c *requestLog) count(method, prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if m, path, _ := strings.Cut(k, " "); m == method && strings.HasPrefix(path, prefix) {
			n += v
		}
	}
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// restrictedConfig returns a client config of a user bound only to config/rbac/role.yaml.
func restrictedConfig(user string) *rest.Config {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(raw, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
	u, err := testEnv.AddUser(envtest.User{Name: user}, nil)
	Expect(err).NotTo(HaveOccurred())
	return u.Config()
}

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
})

type managerOptions struct {
	namespaces []string
	// leaderElection, when set, is the lease id the manager competes for.
	leaderElection string
	lease          time.Duration
	onTick         func(scheduler.TickReport)
	redisURL       string
	// restConfig is the identity the manager runs as; nil means the suite's administrator.
	restConfig *rest.Config
	// scheduler adds options to the scheduler (a clock of the spec's own).
	scheduler []scheduler.Option
	// workers is how many rooms the manager reconciles at once; 0 means the manager's default.
	workers int
}

// startManager runs a manager with the herdgate controllers until ctx ends; it returns when the
// manager has stopped.
func startManager(ctx context.Context, o managerOptions) (stopped <-chan struct{}) {
	defaults := map[string]cache.Config{}
	for _, ns := range o.namespaces {
		defaults[ns] = cache.Config{}
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: defaults},
		// Several managers run in this one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if o.leaderElection != "" {
		renew, retry := o.lease*2/3, o.lease/6
		opts.LeaderElection = true
		opts.LeaderElectionID = o.leaderElection
		opts.LeaderElectionNamespace = o.namespaces[0]
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &o.lease, &renew, &retry
	}
	rc := cfg
	if o.restConfig != nil {
		rc = o.restConfig
	}
	mgr, err := ctrl.NewManager(rc, opts)
	Expect(err).NotTo(HaveOccurred())
	url := o.redisURL
	if url == "" {
		url = redisSrv.URL()
	}
	_, err = controllers.Setup(mgr, controllers.Options{RedisURL: url, ProxyImage: proxyImage, GatewayCheckGrace: 3 * time.Second,
		Scheduler: append([]scheduler.Option{scheduler.WithTickObserver(o.onTick)}, o.scheduler...), MaxConcurrentReconciles: o.workers})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return done
}

// tickLog keeps every tick report of the managers that feed it.
type tickLog struct {
	mu      sync.Mutex
	reports []scheduler.TickReport
}

func (l *tickLog) add(r scheduler.TickReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports = append(l.reports, r)
}

// of returns the reports of one queue, in the order they happened.
func (l *tickLog) of(key types.NamespacedName) []scheduler.TickReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []scheduler.TickReport
	for _, r := range l.reports {
		if r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// eventReasons are the reasons of the Events recorded about wq so far.
func eventReasons(g Gomega, wq *herdgatev1alpha1.WaitingQueue) []string {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace(wq.Namespace))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == wq.Name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}
