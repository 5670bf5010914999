package kubectl

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// bundleOptions are bundle's flags.
type bundleOptions struct {
	output, redisURL, managerNamespace, managerSelector string
	tail                                                int64
	timeout                                             time.Duration
}

func (c *cli) bundleCommand(stdout io.Writer) *cobra.Command {
	var o bundleOptions
	cmd := &cobra.Command{
		Use:   "bundle NAME",
		Short: "Gather a room's status, Events, logs, metrics and Redis figures into one archive for a bug report",
		Long: "bundle writes one .tar.gz with what a bug report about a room needs: the WaitingQueue and its status in\n" +
			"words, its Events and its proxies', the proxy Deployment and pods, the last lines of the proxies' and the\n" +
			"manager's logs, the room's series from their metrics, and the room's figures in Redis (depth, active passes,\n" +
			"totals, the published plan, the proxies' reports, the server's INFO). No Secret value goes in; a part that\n" +
			"cannot be read is listed in errors.txt and the rest is still written.\n\n" +
			"It needs get on waitingqueues, deployments, and secrets (for the room's Redis URL; or give --redis-url), list\n" +
			"on events and pods, get on pods/log, and get on pods/proxy for the metrics.",
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.tail <= 0 {
				return usageError{"bundle", errors.New("flag --tail must be positive")}
			}
			if o.timeout <= 0 {
				return usageError{"bundle", errors.New("flag --timeout must be positive")}
			}
			if _, err := labels.Parse(o.managerSelector); err != nil {
				return usageError{"bundle", fmt.Errorf("flag --manager-selector: %w", err)}
			}
			return c.bundle(cmd.Context(), stdout, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "archive to write (default herdgate-bundle-<namespace>-<name>-<time>.tar.gz; - for stdout)")
	f.StringVar(&o.redisURL, "redis-url", "", "Redis URL to read the room's figures from, e.g. through a port-forward (default: the room's, from its Secret)")
	f.StringVar(&o.managerNamespace, "manager-namespace", "", "namespace of the manager's pods (default: every namespace)")
	f.StringVar(&o.managerSelector, "manager-selector", "app.kubernetes.io/name=herdgate", "label selector of the manager's pods")
	f.Int64Var(&o.tail, "tail", 2000, "lines of each pod's log to include")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long each read may take")
	return cmd
}

// bundle is an archive in the making: its files, and what could not be read.
type bundle struct {
	dir    string
	files  map[string][]byte
	errors []string
}

func (b *bundle) add(name string, data []byte) { b.files[b.dir+"/"+name] = data }

func (b *bundle) fail(part string, err error) {
	b.errors = append(b.errors, fmt.Sprintf("%s: %v", part, err))
}

// addYAML adds obj as YAML, without its managed fields.
func (b *bundle) addYAML(name string, obj any) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	raw, err := yaml.Marshal(obj)
	if err != nil {
		b.fail(name, err)
		return
	}
	b.add(name, raw)
}

// bundleCall bounds one read of the bundle by --timeout.
type bundleCall func() (context.Context, context.CancelFunc)

func (c *cli) bundle(ctx context.Context, stdout io.Writer, name string, o bundleOptions) error {
	cl, ns, err := c.client()
	if err != nil {
		return err
	}
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	call := bundleCall(func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, o.timeout) })

	wq := &herdgatev1alpha1.WaitingQueue{}
	callCtx, cancel := call()
	err = cl.Get(callCtx, types.NamespacedName{Namespace: ns, Name: name}, wq)
	cancel()
	if err != nil {
		return fmt.Errorf("reading waitingqueue %s/%s: %w", ns, name, err)
	}
	now := time.Now().UTC()
	b := &bundle{dir: fmt.Sprintf("herdgate-bundle-%s-%s-%s", ns, name, now.Format("20060102T150405Z")), files: map[string][]byte{}}
	b.addYAML("waitingqueue.yaml", wq.DeepCopy())
	var status bytes.Buffer
	if err := writeStatus(&status, wq); err != nil {
		b.fail("status.txt", err)
	}
	b.add("status.txt", status.Bytes())

	b.proxies(clientset, wq, o, call)
	b.managers(clientset, wq, o, call)
	b.redisOf(ctx, cl, wq, o, call)

	b.add("README.txt", b.readme(wq, now))
	sort.Strings(b.errors)
	b.add("errors.txt", []byte(strings.Join(b.errors, "\n")+"\n"))

	path := o.output
	if path == "" {
		path = b.dir + ".tar.gz"
	}
	if err := b.write(path, stdout); err != nil {
		return err
	}
	if path != "-" {
		fmt.Fprintf(stdout, "wrote %s: %d files", path, len(b.files))
		if len(b.errors) > 0 {
			fmt.Fprintf(stdout, "; %d parts could not be read (errors.txt)", len(b.errors))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

func (b *bundle) readme(wq *herdgatev1alpha1.WaitingQueue, now time.Time) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "kubectl herdgate bundle of waitingqueue %s/%s (uid %s, generation %d), taken %s.\n\n",
		wq.Namespace, wq.Name, wq.UID, wq.Generation, now.Format(time.RFC3339))
	out.WriteString(`waitingqueue.yaml   the WaitingQueue with its status
status.txt          its status in words (kubectl herdgate status)
events.txt          Events of the room, its proxy Deployment, ReplicaSets and pods
proxy/              the proxy Deployment, its pods, their logs and the room's series of their metrics
manager/            the manager's pods, their logs and the room's series of their metrics
redis.txt           the room's figures in Redis, the published plan, the proxies' reports, the server's INFO
errors.txt          the parts that could not be read, and why

No Secret value is included. Logs are the manager's and the proxies' as they are: they may name other rooms.
`)
	return out.Bytes()
}

// write writes the archive to path, or to stdout for "-".
func (b *bundle) write(path string, stdout io.Writer) (err error) {
	w := stdout
	if path != "-" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("writing the bundle: %w", err)
		}
		defer func() {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}()
		w = f
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(b.files))
	for name := range b.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data := b.files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
