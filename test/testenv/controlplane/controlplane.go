// Package controlplane starts a real etcd and kube-apiserver (envtest) for tests, with the WaitingQueue
// CRD installed. It is a package of its own so that the programs that link test/testenv (the herd
// load tool, in an image) do not link envtest, whose set-up writes to /tmp as it loads.
package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/testenv"
)

// ControlPlane is a real etcd and kube-apiserver (envtest) with the WaitingQueue CRD installed, and a
// client of it with every right. Every test that needs an API server starts one here.
type ControlPlane struct {
	Env *envtest.Environment
	// Config reaches the API server as its admin; Client is a client of it that knows the built-in
	// kinds and the WaitingQueue.
	Config *rest.Config
	Scheme *runtime.Scheme
	Client client.Client
}

// Options tune a control plane.
type Options struct {
	// CRDDirectoryPaths hold the CRDs to install; the source tree's config/crd/bases when empty.
	CRDDirectoryPaths []string
	// ServiceIPRange is the API server's --service-cluster-ip-range; envtest's /24 when empty, which
	// holds about 250 Services.
	ServiceIPRange string
}

// Start starts a control plane; Stop stops it.
func Start(o Options) (*ControlPlane, error) {
	assets, err := testenv.EnvtestAssets()
	if err != nil {
		return nil, err
	}
	crds := o.CRDDirectoryPaths
	if len(crds) == 0 {
		root, err := testenv.RepoRoot()
		if err != nil {
			return nil, err
		}
		crds = []string{filepath.Join(root, "config", "crd", "bases")}
	}
	cp := &ControlPlane{Env: &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}}
	if o.ServiceIPRange != "" {
		cp.Env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", o.ServiceIPRange)
	}
	if cp.Config, err = cp.Env.Start(); err != nil {
		// Start may fail after etcd and the API server run (a CRD the API server refuses): stop them.
		return nil, cp.stopAfter(fmt.Errorf("starting the control plane: %w", err))
	}
	cp.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(cp.Scheme); err != nil {
		return nil, cp.stopAfter(err)
	}
	if err := herdgatev1alpha1.AddToScheme(cp.Scheme); err != nil {
		return nil, cp.stopAfter(err)
	}
	if cp.Client, err = client.New(cp.Config, client.Options{Scheme: cp.Scheme}); err != nil {
		return nil, cp.stopAfter(err)
	}
	return cp, nil
}

func (cp *ControlPlane) stopAfter(err error) error {
	_ = cp.Env.Stop()
	return err
}

// T is what New needs of a test: a *testing.T, or ginkgo's GinkgoT() in a suite.
type T interface {
	Helper()
	Fatal(args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// New starts a control plane for t and stops it when t ends.
func New(t T, o Options) *ControlPlane {
	t.Helper()
	cp, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return cp
}

// Stop stops the API server and etcd.
func (cp *ControlPlane) Stop() error { return cp.Env.Stop() }

// WriteKubeconfig writes, as dir/kubeconfig, the kubeconfig of a new user named name in
// system:masters, for tools (kubectl, helm, the manager's binary) run against the control plane.
func (cp *ControlPlane) WriteKubeconfig(name, dir string) (string, error) {
	user, err := cp.Env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}
