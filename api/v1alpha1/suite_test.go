package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// Timeouts of every Eventually in this suite, kept in one place.
const (
	eventuallyTimeout = 30 * time.Second
	pollInterval      = 250 * time.Millisecond
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	repoRoot  string
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "WaitingQueue API suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	repoRoot, err = testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cp := controlplane.New(GinkgoT(), controlplane.Options{})
	testEnv, cfg, k8sClient = cp.Env, cp.Config, cp.Client
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
})

func kubectlPath() string {
	p, err := testenv.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	return p
}
