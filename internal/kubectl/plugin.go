// Package kubectl is herdgate's kubectl plugin (cmd/kubectl-herdgate): the common operations on a
// WaitingQueue, by name, with kubectl's own kubeconfig, context and namespace.
package kubectl

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// errShown is an error already written for the user: Run exits with 1 and adds nothing.
var errShown = errors.New("shown")

// Run runs the plugin with args (without the program's name) and returns the exit code: 0, 1 for a
// failed operation, 2 for a bad command line.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cli
	root := c.command(stdout)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceUsage, root.SilenceErrors = true, true
	err := root.ExecuteContext(ctx)
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "error: %v\nSee 'kubectl herdgate %s --help'.\n", usage.err, usage.command)
		return 2
	case errors.Is(err, errShown):
		return 1
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
}

// usageError is a bad command line.
type usageError struct {
	command string
	err     error
}

func (e usageError) Error() string { return e.err.Error() }

// cli holds the flags every command shares.
type cli struct {
	kubeconfig, context, namespace string
}

func (c *cli) command(stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use: "kubectl-herdgate",
		// As kubectl runs it: every usage line says kubectl herdgate, not the binary's name.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl herdgate"},
		Short:       "Operate herdgate's waiting rooms (WaitingQueues)",
		Long: "kubectl herdgate operates herdgate's waiting rooms: shows a room's state in words, switches its mode, checks\n" +
			"a draw or a pass, and bundles what a bug report needs.\n" +
			"It reads kubectl's kubeconfig, context and namespace, and needs get and patch on waitingqueues.",
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{cmd.Name(), err} })
	f := root.PersistentFlags()
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&c.namespace, "namespace", "n", "", "the WaitingQueue's namespace (default: the context's)")
	root.AddCommand(c.statusCommand(stdout), c.eventsCommand(stdout), c.drawCommand(stdout), c.passCommand(stdout), c.bundleCommand(stdout))
	for _, m := range modeCommands {
		root.AddCommand(c.modeCommand(stdout, m))
	}
	return root
}

// oneName checks that a command got exactly one WaitingQueue name.
func oneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError{cmd.Name(), fmt.Errorf("%s needs the WaitingQueue's name, and only that (got %d arguments)", cmd.Name(), len(args))}
	}
	return nil
}

// loader reads the kubeconfig as kubectl would, with the command line's context and namespace.
func (c *cli) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	if c.namespace != "" {
		overrides.Context.Namespace = c.namespace
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// restConfig is the config of the cluster kubectl would talk to.
func (c *cli) restConfig() (*rest.Config, error) {
	cfg, err := c.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// client is a client of the cluster kubectl would talk to, and the namespace it would use.
func (c *cli) client() (client.Client, string, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := c.loader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := herdgatev1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", err
	}
	return cl, ns, nil
}
