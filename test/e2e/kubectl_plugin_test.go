package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/kubectl"
	roomphase "github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// pluginKubeconfig is a kubeconfig of an operator allowed everything, for the plugin.
func pluginKubeconfig(t *testing.T) string {
	t.Helper()
	user, err := testEnv.AddUser(envtest.User{Name: "plugin-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// herdgate runs kubectl herdgate with args and returns its exit code and what it wrote.
func herdgate(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := kubectl.Run(context.Background(), append([]string{"--kubeconfig", kubeconfig}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestKubectlPluginSwitchesModesAndKeepsEveryPlace: close then queue keep every waiting visitor's
// place, open admits them, and status tells the room's state in words.
func TestKubectlPluginSwitchesModesAndKeepsEveryPlace(t *testing.T) {
	kubeconfig := pluginKubeconfig(t)
	wq := builder.Queue("plugin", "drop").Suspend(true).Obj()
	createQueue(t, wq)
	store := newStore(t)
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !done(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s", what)
			}
		}
	}
	// The scheduler publishes the plan of a suspended room too; until then enter has none.
	waitFor("the room's plan", func() bool { _, err := q.ReadPlan(ctx); return err == nil })
	const visitors = 30
	places := map[string]int64{}
	for i := range visitors {
		id := fmt.Sprintf("visitor-%02d", i)
		p, err := q.Enter(ctx, id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != queue.Waiting {
			t.Fatalf("%s entering a suspended room: %v, want waiting", id, p.State)
		}
		places[id] = p.Position
	}
	placesKept := func(when string) {
		t.Helper()
		for id, want := range places {
			p, err := q.Status(ctx, id, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if p.State != queue.Waiting || p.Position != want {
				t.Fatalf("%s: %s is %v at %d, want waiting at %d", when, id, p.State, p.Position, want)
			}
		}
	}
	modeIs := func(want herdgatev1alpha1.Mode) {
		t.Helper()
		waitFor("mode "+string(want)+" in the scheduler's plan", func() bool {
			got := &herdgatev1alpha1.WaitingQueue{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wq), got); err != nil || got.Spec.EffectiveMode() != want {
				return false
			}
			return got.Status.ObservedGeneration == got.Generation
		})
	}

	code, out, errOut := herdgate(t, kubeconfig, "-n", "plugin", "close", "drop")
	if code != 0 || !strings.Contains(out, "waitingqueue plugin/drop: mode Closed") {
		t.Fatalf("close: exit %d, %q %q", code, out, errOut)
	}
	modeIs(herdgatev1alpha1.ModeClosed)
	time.Sleep(300 * time.Millisecond) // a few ticks of the closed room
	placesKept("closed")

	if code, out, errOut := herdgate(t, kubeconfig, "queue", "drop", "--namespace=plugin"); code != 0 || !strings.Contains(out, "mode Queue, suspended") {
		t.Fatalf("queue: exit %d, %q %q", code, out, errOut)
	}
	modeIs(herdgatev1alpha1.ModeQueue)
	time.Sleep(300 * time.Millisecond)
	placesKept("back to Queue, still suspended")

	if code, out, errOut := herdgate(t, kubeconfig, "-n", "plugin", "open", "drop"); code != 0 || strings.Contains(out, "suspended") {
		t.Fatalf("open: exit %d, %q %q", code, out, errOut)
	}
	waitFor("every visitor admitted after open", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.AdmittedTotal >= visitors && st.Depth == 0
	})
	for id := range places {
		if p, err := q.Status(ctx, id, time.Hour); err != nil || p.State != queue.Admitted {
			t.Fatalf("after open: %s is %v (%v), want admitted", id, p.State, err)
		}
	}

	// status, once the manager has written what the open room does.
	var status string
	waitFor("status of the open room", func() bool {
		code, out, _ := herdgate(t, kubeconfig, "-n", "plugin", "status", "drop")
		status = out
		return code == 0 && strings.Contains(out, "Phase:") && strings.Contains(out, "Open, mode Queue\n")
	})
	t.Logf("kubectl herdgate status drop:\n%s", status)
	for _, want := range []string{"WaitingQueue:  plugin/drop", "Plan:", "14 per tick of 100ms, 140 a second (Derived)",
		"Queue:", "0 waiting", "Admitted:", "Conditions:", "Admitting yes (SchedulerRunning)", "RedisAvailable yes"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
}

// TestKubectlPluginRefusesBadCommandLines: a clear message and exit 2 for a bad command line, exit 1
// for a room that does not exist.
func TestKubectlPluginRefusesBadCommandLines(t *testing.T) {
	kubeconfig := pluginKubeconfig(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status"}, 2, "status needs the WaitingQueue's name"},
		{[]string{"close", "a", "b"}, 2, "close needs the WaitingQueue's name, and only that"},
		{[]string{"status", "drop", "--colour"}, 2, "unknown flag: --colour"},
		{[]string{"frobnicate"}, 1, `unknown command "frobnicate"`},
		{[]string{"-n", "plugin", "status", "no-such-room"}, 1, `reading waitingqueue plugin/no-such-room`},
		{[]string{"-n", "plugin", "close", "no-such-room"}, 1, `setting the mode of waitingqueue plugin/no-such-room`},
	} {
		code, out, errOut := herdgate(t, kubeconfig, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("kubectl herdgate %v: exit %d, stderr %q (stdout %q); want exit %d naming %q", tc.args, code, errOut, out, tc.code, tc.want)
		}
	}
}

// TestKubectlPluginVerifiesADraw: draw verify takes the seed and its commitment from the room's status and
// checks a record exported from Redis, and finds a record with two places swapped.
func TestKubectlPluginVerifiesADraw(t *testing.T) {
	kubeconfig := pluginKubeconfig(t)
	now := time.Now().Truncate(time.Second)
	// The seed's commitment is published before the pre-queue opens, so the schedule lies ahead.
	wq := builder.Queue("plugin", "launch").Schedule(now.Add(3*time.Second), now.Add(7*time.Second), time.Time{}).Suspend(true).Obj()
	createQueue(t, wq)
	q, err := newStore(t).Queue(wq.Namespace, wq.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if code, _, errOut := herdgate(t, kubeconfig, "-n", "plugin", "draw", "verify", "launch", "--record", "-"); code != 1 ||
		!strings.Contains(errOut, "has revealed no seed") {
		t.Fatalf("draw verify before the opening: exit %d, %q", code, errOut)
	}
	// Visitors who came before the scheduler published the pre-queue would take places in the queue.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p, err := q.ReadPlan(ctx); err == nil && p.Phase == roomphase.PreQueue {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler did not publish the pre-queue")
		}
	}
	entered := 0
	for deadline := time.Now().Add(30 * time.Second); entered < 20; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d visitors took a pre-queue place", entered)
		}
		p, err := q.Enter(ctx, fmt.Sprintf("early-%02d", entered), time.Hour)
		if err == nil && p.State == queue.PreQueued {
			entered++
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := q.ReadDrawState(ctx)
		if err == nil && st.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the draw did not finish: %+v %v", st, err)
		}
	}
	var record bytes.Buffer
	if _, err := q.WriteDrawRecord(ctx, &record); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "draw.txt")
	if err := os.WriteFile(path, record.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) { // status.seed follows the draw
		code, stdout, errOut := herdgate(t, kubeconfig, "-n", "plugin", "draw", "verify", "launch", "--record", path)
		if code == 0 {
			out = stdout
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("draw verify: exit %d, %q %q", code, stdout, errOut)
		}
	}
	if !strings.Contains(out, "ok: all 20 places recomputed from the draw's seed match the record") {
		t.Fatalf("draw verify: %q", out)
	}

	// Two places swapped: lines "arrival place", the first two of the record.
	lines := strings.Split(strings.TrimSpace(record.String()), "\n")
	a, b := strings.Fields(lines[0]), strings.Fields(lines[1])
	lines[0], lines[1] = a[0]+" "+b[1], b[0]+" "+a[1]
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := herdgate(t, kubeconfig, "-n", "plugin", "draw", "verify", "launch", "--record", path)
	if code != 1 || !strings.Contains(stdout, "FAILED: arrival") {
		t.Fatalf("draw verify of a record with two places swapped: exit %d, %q %q", code, stdout, errOut)
	}
}

// TestKubectlPluginVerifiesABeaconDraw: for a room whose draw took a beacon's round, draw verify
// checks the round's signature offline against the chain in status, with the chain's public key
// given or not, and recomputes the record from the seed the round made; a public key other than the
// chain's is refused.
func TestKubectlPluginVerifiesABeaconDraw(t *testing.T) {
	kubeconfig := pluginKubeconfig(t)
	b := testenv.StartBeacon(t, testenv.BeaconOptions{})
	other := testenv.StartBeacon(t, testenv.BeaconOptions{})
	now := time.Now().Truncate(time.Second)
	wq := builder.Queue("plugin", "beacon-launch").Schedule(now.Add(3*time.Second), now.Add(7*time.Second), time.Time{}).
		Beacon(b.URL, b.Hash, 30*time.Second).Suspend(true).Obj()
	createQueue(t, wq)
	q, err := newStore(t).Queue(wq.Namespace, wq.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p, err := q.ReadPlan(ctx); err == nil && p.Phase == roomphase.PreQueue {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler did not publish the pre-queue")
		}
	}
	for i := range 20 {
		if p, err := q.Enter(ctx, fmt.Sprintf("early-%02d", i), time.Hour); err != nil || p.State != queue.PreQueued {
			t.Fatalf("entering the pre-queue: %+v, %v", p, err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := q.ReadDrawState(ctx)
		if err == nil && st.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the draw did not finish: %+v %v", st, err)
		}
	}
	var record bytes.Buffer
	if _, err := q.WriteDrawRecord(ctx, &record); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "draw.txt")
	if err := os.WriteFile(path, record.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) { // status.draw follows the draw
		code, stdout, errOut := herdgate(t, kubeconfig, "-n", "plugin", "draw", "verify", "beacon-launch", "--record", path, "--public-key", b.PublicKey())
		if code == 0 {
			out = stdout
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("draw verify: exit %d, %q %q", code, stdout, errOut)
		}
	}
	for _, want := range []string{"seed source Beacon", "its signature verifies with the chain's public key " + b.PublicKey(), "ok: all 20 places recomputed from the draw's seed match the record"} {
		if !strings.Contains(out, want) {
			t.Fatalf("draw verify: %q; want %q", out, want)
		}
	}
	code, stdout, errOut := herdgate(t, kubeconfig, "-n", "plugin", "draw", "verify", "beacon-launch", "--public-key", other.PublicKey())
	if code != 1 || !strings.Contains(stdout, "FAILED: the chain in status has the public key") {
		t.Fatalf("draw verify with another chain's public key: exit %d, %q %q", code, stdout, errOut)
	}
}

// TestKubectlPluginInspectsPasses: pass inspect checks a pass with the room's own keys, HMAC or JWT, says
// whose it is and when it is valid, and refuses a pass of another room, a changed one and another
// visitor's.
func TestKubectlPluginInspectsPasses(t *testing.T) {
	kubeconfig := pluginKubeconfig(t)
	hmacRoom := builder.Queue("plugin", "passes").Obj()
	jwtRoom := builder.Queue("plugin", "jwt-passes").JWTPasses("", 0).Obj()
	issue := func(wq *herdgatev1alpha1.WaitingQueue, visitor string, notBefore time.Time) string {
		t.Helper()
		secret := &corev1.Secret{}
		var cfg *admission.Config
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)
			if err == nil {
				if cfg, err = configFromSecret(wq, secret); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no config for %s: %v", wq.Name, err)
			}
		}
		return cfg.Passes.Issue(visitor, notBefore, notBefore.Add(10*time.Minute))
	}
	for _, wq := range []*herdgatev1alpha1.WaitingQueue{hmacRoom, jwtRoom} {
		createQueue(t, wq)
		token := issue(wq, "visitor-7", time.Now().Add(-time.Minute))
		code, out, errOut := herdgate(t, kubeconfig, "-n", "plugin", "pass", "inspect", wq.Name, token)
		// Nine minutes are left when the pass is issued, less the time the command takes to be run.
		left := time.Duration(0)
		if m := regexp.MustCompile(`valid for another (\S+)\)`).FindStringSubmatch(out); m != nil {
			left, _ = time.ParseDuration(m[1])
		}
		if code != 0 || !strings.Contains(out, `valid: a pass of waitingqueue plugin/`+wq.Name+` for visitor "visitor-7"`) ||
			left < 8*time.Minute || left > 9*time.Minute {
			t.Errorf("%s: pass inspect of a valid pass: exit %d, %q %q", wq.Name, code, out, errOut)
		}
		if code, out, _ := herdgate(t, kubeconfig, "-n", "plugin", "pass", "inspect", wq.Name, token, "--visitor", "visitor-8"); code != 1 ||
			!strings.HasPrefix(out, "wrong_visitor:") {
			t.Errorf("%s: another visitor's pass: exit %d, %q", wq.Name, code, out)
		}
		later := issue(wq, "visitor-7", time.Now().Add(time.Hour))
		if code, out, _ := herdgate(t, kubeconfig, "-n", "plugin", "pass", "inspect", wq.Name, later); code != 1 ||
			!strings.HasPrefix(out, "not_yet_valid:") || !regexp.MustCompile(`\(valid in (59m|1h0m)`).MatchString(out) {
			t.Errorf("%s: a pass valid in an hour: exit %d, %q", wq.Name, code, out)
		}
		changed := token[:len(token)-4] + strings.Map(func(r rune) rune {
			if r == 'A' {
				return 'B'
			}
			return 'A'
		}, token[len(token)-4:])
		if code, out, _ := herdgate(t, kubeconfig, "-n", "plugin", "pass", "inspect", wq.Name, changed); code != 1 || strings.HasPrefix(out, "valid") {
			t.Errorf("%s: a changed pass: exit %d, %q", wq.Name, code, out)
		}
	}
	other := issue(hmacRoom, "visitor-7", time.Now().Add(-time.Minute))
	if code, out, _ := herdgate(t, kubeconfig, "-n", "plugin", "pass", "inspect", jwtRoom.Name, other); code != 1 ||
		!strings.Contains(out, "does not verify with the keys of waitingqueue plugin/jwt-passes") {
		t.Errorf("a pass of another room: exit %d, %q", code, out)
	}
	if code, _, errOut := herdgate(t, kubeconfig, "-n", "plugin", "pass", "inspect", "passes"); code != 2 ||
		!strings.Contains(errOut, "pass inspect needs the WaitingQueue's name and the pass") {
		t.Errorf("pass inspect without a pass: exit %d, %q", code, errOut)
	}
}

// TestKubectlPluginBundlesARoom: bundle writes one archive with the room, its status in words, its
// Events (not another room's), its proxy Deployment, and its figures in Redis, never a Secret
// value; parts it cannot read (the metrics of pods no kubelet runs here) are listed in errors.txt
// and do not stop it.
func TestKubectlPluginBundlesARoom(t *testing.T) {
	kubeconfig := pluginKubeconfig(t)
	ctx := context.Background()
	wq := builder.Queue("plugin-bundle", "drop").Suspend(true).Obj()
	createQueue(t, wq)
	other := builder.Queue("plugin-bundle", "other").Suspend(true).Obj()
	createQueue(t, other)
	q, err := newStore(t).Queue(wq.Namespace, wq.Name)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := q.ReadPlan(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler published no plan within 30 s")
		}
	}
	const waiting = 25
	for i := range waiting {
		if _, err := q.Enter(ctx, fmt.Sprintf("visitor-%02d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []struct{ room, reason string }{{"drop", "BundleMe"}, {"other", "NotMine"}} {
		event := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: wq.Namespace, GenerateName: e.room + "-"},
			InvolvedObject: corev1.ObjectReference{Kind: "WaitingQueue", APIVersion: herdgatev1alpha1.GroupVersion.String(), Namespace: wq.Namespace, Name: e.room},
			Reason:         e.reason, Message: "a reason of " + e.room, Type: corev1.EventTypeNormal,
			LastTimestamp: metav1.Now(), Count: 1, Source: corev1.EventSource{Component: "test"},
		}
		if err := k8sClient.Create(ctx, event); err != nil {
			t.Fatal(err)
		}
	}
	// A proxy pod and a manager pod that no kubelet runs: their logs and metrics cannot be read.
	deployment := &appsv1.Deployment{}
	for deadline := time.Now().Add(30 * time.Second); k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deployment) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the operator made no proxy Deployment within 30 s")
		}
	}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: wq.Namespace, Name: "drop-proxy-1", Labels: deployment.Spec.Selector.MatchLabels}, Spec: deployment.Spec.Template.Spec},
		{ObjectMeta: metav1.ObjectMeta{Namespace: wq.Namespace, Name: "herdgate-manager-1", Labels: map[string]string{"app.kubernetes.io/name": "herdgate"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.example/herdgate:e2e"}}}},
	}
	for _, p := range pods {
		if err := k8sClient.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
	}

	archive := filepath.Join(t.TempDir(), "bundle.tar.gz")
	code, out, errOut := herdgate(t, kubeconfig, "-n", wq.Namespace, "bundle", "drop", "-o", archive, "--manager-namespace", wq.Namespace, "--timeout", "3s")
	if code != 0 || !strings.Contains(out, "wrote "+archive) {
		t.Fatalf("bundle: exit %d, %q %q", code, out, errOut)
	}
	files, err := testenv.ReadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string) string {
		t.Helper()
		for path, data := range files {
			if strings.HasSuffix(path, "/"+name) {
				return data
			}
		}
		t.Fatalf("the bundle has no %s; it has %v", name, slices.Sorted(maps.Keys(files)))
		return ""
	}
	for name, wants := range map[string][]string{
		"waitingqueue.yaml":     {"name: drop", "namespace: plugin-bundle", "status:"},
		"status.txt":            {"WaitingQueue:", "plugin-bundle/drop", "suspended"},
		"events.txt":            {"BundleMe", "a reason of drop"},
		"proxy/deployment.yaml": {"name: " + wq.ProxyName()},
		"proxy/pods.txt":        {"drop-proxy-1"},
		"manager/pods.txt":      {"herdgate-manager-1"},
		"redis.txt":             {fmt.Sprintf("Waiting:         %d", waiting), "Active passes:", "Published plan:", "redis_version:", "role:master"},
		"errors.txt":            {"proxy/metrics/drop-proxy-1.txt", "manager/metrics/herdgate-manager-1.txt"},
		// A pod no node runs has an empty log.
		"proxy/logs/drop-proxy-1.log":         nil,
		"manager/logs/herdgate-manager-1.log": nil,
		"README.txt":                          {"No Secret value is included"},
	} {
		got := file(name)
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, got)
			}
		}
	}
	if got := file("events.txt"); strings.Contains(got, "NotMine") {
		t.Errorf("events.txt holds another room's Event:\n%s", got)
	}
	if got := file("waitingqueue.yaml"); strings.Contains(got, "managedFields") {
		t.Error("waitingqueue.yaml keeps the managed fields")
	}
	secret := &corev1.Secret{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret); err != nil {
		t.Fatal(err)
	}
	for path, data := range files {
		for key, value := range secret.Data {
			if len(value) >= 8 && (strings.Contains(data, string(value)) || strings.Contains(data, base64.StdEncoding.EncodeToString(value))) {
				t.Errorf("%s holds the Secret's %s", path, key)
			}
		}
	}

	t.Run("a Redis it cannot reach is an error in the archive, not a failure", func(t *testing.T) {
		archive := filepath.Join(t.TempDir(), "bundle.tar.gz")
		code, _, errOut := herdgate(t, kubeconfig, "-n", wq.Namespace, "bundle", "drop", "-o", archive, "--redis-url", "redis://127.0.0.1:1", "--timeout", "2s")
		if code != 0 {
			t.Fatalf("bundle: exit %d, %q", code, errOut)
		}
		files, err := testenv.ReadArchive(archive)
		if err != nil {
			t.Fatal(err)
		}
		for path, data := range files {
			if strings.HasSuffix(path, "/errors.txt") && !strings.Contains(data, "redis.txt: reading stats of queue") {
				t.Errorf("errors.txt does not say Redis could not be read:\n%s", data)
			}
			if strings.HasSuffix(path, "/redis.txt") {
				t.Error("the bundle has a redis.txt though Redis was not reachable")
			}
		}
	})
	t.Run("bad command lines and a file already there are refused", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"bundle", "drop", "--tail", "0"}, 2, "flag --tail must be positive"},
			{[]string{"bundle", "drop", "--manager-selector", "a in (b"}, 2, "flag --manager-selector"},
			{[]string{"bundle"}, 2, "bundle needs the WaitingQueue's name"},
			{[]string{"bundle", "absent"}, 1, "reading waitingqueue plugin-bundle/absent"},
			{[]string{"bundle", "drop", "-o", archive}, 1, "file exists"},
		} {
			code, _, errOut := herdgate(t, kubeconfig, append([]string{"-n", wq.Namespace}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("%v: exit %d, %q; want exit %d naming %q", tc.args, code, errOut, tc.code, tc.want)
			}
		}
	})
}
