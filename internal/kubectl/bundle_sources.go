package kubectl

// What bundle reads from each source: the Events, the pods' logs and metrics, and Redis.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// events adds the Events of the room and of the objects named, oldest first.
func (b *bundle) events(clientset kubernetes.Interface, ns, name string, objects map[string]bool,
	call func() (context.Context, context.CancelFunc)) {
	callCtx, cancel := call()
	list, err := clientset.CoreV1().Events(ns).List(callCtx, metav1.ListOptions{})
	cancel()
	if err != nil {
		b.fail("events.txt", err)
		return
	}
	var kept []corev1.Event
	for _, e := range list.Items {
		o := e.InvolvedObject
		if (o.Kind == "WaitingQueue" && o.Name == name) || objects[o.Name] {
			kept = append(kept, e)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return eventTime(&kept[i]).Before(eventTime(&kept[j])) })
	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LAST SEEN\tTYPE\tREASON\tOBJECT\tCOUNT\tMESSAGE")
	for _, e := range kept {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%d\t%s\n", eventTime(&e).UTC().Format(time.RFC3339), e.Type, e.Reason,
			strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, max(e.Count, 1), e.Message)
	}
	_ = w.Flush()
	b.add("events.txt", out.Bytes())
}

func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// podLog adds the last lines of each container's log of pod.
func (b *bundle) podLog(clientset kubernetes.Interface, pod *corev1.Pod, role string, tail int64,
	call func() (context.Context, context.CancelFunc)) {
	for _, c := range pod.Spec.Containers {
		name := fmt.Sprintf("%s/logs/%s.log", role, pod.Name)
		if len(pod.Spec.Containers) > 1 {
			name = fmt.Sprintf("%s/logs/%s.%s.log", role, pod.Name, c.Name)
		}
		callCtx, cancel := call()
		raw, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(callCtx)
		cancel()
		if err != nil {
			b.fail(name, err)
			continue
		}
		b.add(name, raw)
	}
}

// podMetrics adds the room's series from pod's metrics, read through the API server's proxy.
func (b *bundle) podMetrics(clientset kubernetes.Interface, pod *corev1.Pod, role string, port int32,
	wq *herdgatev1alpha1.WaitingQueue, call func() (context.Context, context.CancelFunc)) {
	name := fmt.Sprintf("%s/metrics/%s.txt", role, pod.Name)
	callCtx, cancel := call()
	raw, err := clientset.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, fmt.Sprint(port), "/metrics", nil).DoRaw(callCtx)
	cancel()
	if err != nil {
		b.fail(name, err)
		return
	}
	b.add(name, roomSeries(raw, wq))
}

// metricsPort is the port a container of pod names metrics, or otherwise the program's default.
func metricsPort(pod *corev1.Pod, otherwise int32) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "metrics" {
				return p.ContainerPort
			}
		}
	}
	return otherwise
}

// roomSeries keeps, of a metrics page, the room's series with their HELP and TYPE lines, and the
// series of no room (the process's own).
func roomSeries(page []byte, wq *herdgatev1alpha1.WaitingQueue) []byte {
	ours := []string{
		fmt.Sprintf(`namespace=%q,name=%q`, wq.Namespace, wq.Name), fmt.Sprintf(`name=%q,namespace=%q`, wq.Name, wq.Namespace),
		fmt.Sprintf(`waitingqueue=%q`, wq.Namespace+"/"+wq.Name),
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		series, _, _ := strings.Cut(line, " ")
		keep := strings.HasPrefix(line, "#") || !strings.Contains(series, "{")
		if !keep {
			_, labels, _ := strings.Cut(series, "{")
			if !strings.Contains(labels, "namespace=") && !strings.Contains(labels, "waitingqueue=") {
				keep = true // a series of no room
			}
			for _, o := range ours {
				keep = keep || strings.Contains(labels, o)
			}
		}
		if keep {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// redis adds the room's figures in Redis and the server's INFO.
func (b *bundle) redis(ctx context.Context, url string, wq *herdgatev1alpha1.WaitingQueue, timeout time.Duration) {
	rdb, err := queue.NewClient(url, queue.ClientOptions{ClientName: "kubectl-herdgate"})
	if err != nil {
		b.fail("redis.txt", fmt.Errorf("the room's Redis URL: %w", err))
		return
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		b.fail("redis.txt", err)
		return
	}
	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := q.Stats(callCtx)
	if err != nil {
		b.fail("redis.txt", fmt.Errorf("%w (from outside the cluster, port-forward to Redis and give --redis-url)", err))
		return
	}
	row := func(k, format string, v ...any) { fmt.Fprintf(w, "%s:\t%s\n", k, fmt.Sprintf(format, v...)) }
	row("Redis time", "%s", st.Now.UTC().Format(time.RFC3339Nano))
	row("Waiting", "%d", st.Depth)
	row("Pre-queue", "%d", st.PreQueued)
	row("Active passes", "%d", st.Active)
	row("Admitted", "%d (at once on entering: %d)", st.AdmittedTotal, st.InstantAdmittedTotal)
	row("Released", "%d", st.ReleasedTotal)
	row("Abandoned", "%d", st.AbandonedTotal)
	if plan, err := q.ReadPlan(callCtx); err != nil {
		b.fail("redis.txt: plan", err)
	} else {
		row("Published plan", "%d per tick of %s; phase %s, suspended %t", plan.Quota.BatchSize(), plan.Quota.Tick(), publishedPhase(plan), plan.Suspended)
	}
	if reports, err := q.ProxyReports(callCtx, time.Hour); err != nil {
		b.fail("redis.txt: proxy reports", err)
	} else {
		row("Proxy reports", "%d in the last hour", len(reports))
		for _, r := range reports {
			line := fmt.Sprintf("serves generation %d", r.Generation)
			if r.RefusedGeneration != 0 {
				line += fmt.Sprintf("; refuses generation %d: %s", r.RefusedGeneration, r.Refusal)
			}
			row("  "+r.Replica, "%s", line)
		}
	}
	_ = w.Flush()
	out.WriteString("\n")
	for _, section := range []string{"server", "clients", "memory", "persistence", "stats", "replication", "cluster"} {
		info, err := rdb.Info(callCtx, section).Result()
		if err != nil {
			b.fail("redis.txt: INFO "+section, err)
			continue
		}
		out.WriteString(strings.ReplaceAll(info, "\r\n", "\n"))
	}
	b.add("redis.txt", out.Bytes())
}

func publishedPhase(p queue.PublishedPlan) string {
	if p.Phase == "" {
		return "Open"
	}
	return string(p.Phase)
}

// podTable lists pods as kubectl get pods does.
func podTable(pods []corev1.Pod) []byte {
	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tPHASE\tREADY\tRESTARTS\tNODE\tCREATED")
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				ready++
			}
			restarts += s.RestartCount
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", p.Namespace, p.Name, p.Status.Phase, ready, len(p.Spec.Containers), restarts,
			p.Spec.NodeName, p.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	_ = w.Flush()
	return out.Bytes()
}

// proxies adds the room's proxies: their Deployment, its pods (by its own selector), Events, logs
// and metrics.
func (b *bundle) proxies(clientset kubernetes.Interface, wq *herdgatev1alpha1.WaitingQueue, o bundleOptions, call bundleCall) {
	ns := wq.Namespace
	callCtx, cancel := call()
	deployment, err := clientset.AppsV1().Deployments(ns).Get(callCtx, wq.ProxyName(), metav1.GetOptions{})
	cancel()
	proxyPods := &corev1.PodList{}
	if err != nil {
		b.fail("proxy/deployment.yaml", err)
	} else {
		b.addYAML("proxy/deployment.yaml", deployment.DeepCopy())
		selector, err := metav1.LabelSelectorAsSelector(deployment.Spec.Selector)
		if err == nil {
			callCtx, cancel = call()
			proxyPods, err = clientset.CoreV1().Pods(ns).List(callCtx, metav1.ListOptions{LabelSelector: selector.String()})
			cancel()
		}
		if err != nil {
			b.fail("proxy/pods.txt", err)
			proxyPods = &corev1.PodList{}
		}
	}
	b.add("proxy/pods.txt", podTable(proxyPods.Items))
	objects := map[string]bool{wq.ProxyName(): true}
	for _, p := range proxyPods.Items {
		objects[p.Name] = true
		if ref := metav1.GetControllerOf(&p); ref != nil {
			objects[ref.Name] = true // the ReplicaSet
		}
	}
	b.events(clientset, ns, wq.Name, objects, call)
	for _, p := range proxyPods.Items {
		b.podLog(clientset, &p, "proxy", o.tail, call)
		b.podMetrics(clientset, &p, "proxy", metricsPort(&p, 9090), wq, call)
	}
}

// managers adds the manager's pods: the leader's scheduler runs the room, so every replica's log
// and metrics go in.
func (b *bundle) managers(clientset kubernetes.Interface, wq *herdgatev1alpha1.WaitingQueue, o bundleOptions, call bundleCall) {
	callCtx, cancel := call()
	managerPods, err := clientset.CoreV1().Pods(o.managerNamespace).List(callCtx, metav1.ListOptions{LabelSelector: o.managerSelector})
	cancel()
	if err != nil {
		b.fail("manager/pods", err)
		managerPods = &corev1.PodList{}
	}
	if len(managerPods.Items) == 0 && err == nil {
		b.fail("manager/pods", fmt.Errorf("no pod matches %q; set --manager-namespace and --manager-selector", o.managerSelector))
	}
	b.add("manager/pods.txt", podTable(managerPods.Items))
	for _, p := range managerPods.Items {
		b.podLog(clientset, &p, "manager", o.tail, call)
		b.podMetrics(clientset, &p, "manager", metricsPort(&p, 8080), wq, call)
	}
}

// redisOf adds the room's figures in Redis, from --redis-url or the URL in the room's Secret.
func (b *bundle) redisOf(ctx context.Context, cl client.Client, wq *herdgatev1alpha1.WaitingQueue, o bundleOptions, call bundleCall) {
	url := o.redisURL
	if url == "" {
		ns := wq.Namespace
		secret := &corev1.Secret{}
		callCtx, cancel := call()
		err := cl.Get(callCtx, types.NamespacedName{Namespace: ns, Name: wq.SecretName()}, secret)
		cancel()
		switch {
		case err != nil:
			b.fail("redis.txt", fmt.Errorf("reading the room's Redis URL from secret %s/%s: %w; or give --redis-url", ns, wq.SecretName(), err))
		case len(secret.Data[herdgatev1alpha1.SecretRedisURL]) == 0:
			b.fail("redis.txt", fmt.Errorf("secret %s/%s has no %s; give --redis-url", ns, wq.SecretName(), herdgatev1alpha1.SecretRedisURL))
		default:
			url = string(secret.Data[herdgatev1alpha1.SecretRedisURL])
		}
	}
	if url != "" {
		b.redis(ctx, url, wq, o.timeout)
	}
}
