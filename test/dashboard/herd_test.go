package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// The room of the herd: 10 admissions a second (2 connections held 100 ms each at 50 %), adaptive,
// its active passes capped, a bypass lane for a partner's direct orders, a metered lane for members
// (a header the site's gateway sets), and entries limited per client address, a client far over
// its limit going to the shadow queue. Beside it, a room its gateway enforces, which only checks
// reach.
const (
	roomNamespace, roomName = "shop", "launch"
	gatewayRoomName         = "checkout"
	herdSize                = 200
	plannedRate             = 10
	maxActive               = 150
	bypassRule              = "partner-direct"
	memberHeader            = "X-Member-Tier"
	memberValue             = "gold-tier-0123456789"
	// A bot asks from one address, far more often than the limit lets it take places.
	botAddress = "192.0.2.66"
)

// TestEveryPanelQueryReturnsDataDuringAHerd runs the manager and two admission proxies (their
// binaries) on a control plane and a Redis of the test's own, scraped every second by a real
// Prometheus, and sends a herd through the proxies: visitors who enter (some in the members' lane),
// poll (each once too early), and order with their pass, forged passes, orders through the bypass
// lane, and a bot whose entries end in the shadow queue. A third proxy serves the Gateway room, which
// a gateway's checks reach meanwhile. Then it fills in the dashboard's variables and evaluates every
// query of every panel over the herd, the Gateway row's for the Gateway room: each returns a series
// with a value, and the room selector lists the room.
func TestEveryPanelQueryReturnsDataDuringAHerd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a herd through the manager and two proxies")
	}
	d, _ := readDashboard(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	for _, cmd := range []string{"manager", "herdgate-proxy"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bins, cmd), filepath.Join(root, "cmd", cmd)).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", cmd, err, out)
		}
	}
	cp := controlplane.New(t, controlplane.Options{})
	redis := testenv.StartRedis(t)
	kubeconfig, err := cp.WriteKubeconfig("dashboard", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	managerMetrics := freeAddress(t)
	start(t, "manager", filepath.Join(bins, "manager"), []string{"KUBECONFIG=" + kubeconfig},
		"--redis-url="+redis.URL(), "--proxy-image=registry.example/herdgate:dashboard",
		"--metrics-bind-address="+managerMetrics, "--health-probe-bind-address=0", "--zap-log-level=error")

	var orders atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		orders.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	wq := builder.Queue(roomNamespace, roomName).UpstreamURL(upstream.URL).Identity("X-User-Id").
		Capacity(2, 100*time.Millisecond, 50).Adaptive(0).MaxActive(maxActive).PassTTL(10*time.Second).
		Polling(200*time.Millisecond, time.Second).
		Bypass(herdgatev1alpha1.BypassRule{Name: bypassRule, Path: ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders/direct"))}).
		Lanes(builder.LaneByHeader("members", 20, memberHeader, "lanes", "members")).
		Entry(&herdgatev1alpha1.EntrySpec{
			PerClient:      &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](2), PerMinute: ptr.To[int32](1)},
			TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.1/32"},
		}).ShadowQueue(false, 2).Obj()
	gatewayRoom := builder.Queue(roomNamespace, gatewayRoomName).UpstreamURL(upstream.URL).Identity("X-User-Id").
		Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: roomNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: roomNamespace, Name: "lanes"}, Data: map[string][]byte{"members": []byte(memberValue)}},
		wq, gatewayRoom,
	} {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	var proxies, proxyMetrics []string
	for _, replica := range []string{"proxy-a", "proxy-b"} {
		listen := startProxy(t, cp, bins, kubeconfig, redis.URL(), wq, replica)
		proxies, proxyMetrics = append(proxies, "http://"+listen.visitors), append(proxyMetrics, listen.metrics)
	}
	gatewayProxy := startProxy(t, cp, bins, kubeconfig, redis.URL(), gatewayRoom, "proxy-gateway")
	proxyMetrics = append(proxyMetrics, gatewayProxy.metrics)

	prom, err := testenv.StartPrometheus(t.TempDir(),
		testenv.ScrapeJob{Name: "herdgate-manager", Targets: []string{managerMetrics}},
		testenv.ScrapeJob{Name: "herdgate-proxy", Targets: proxyMetrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)

	began := time.Now()
	herd := runHerd(t, proxies, "http://"+gatewayProxy.visitors)
	t.Logf("herd of %d through two proxies in %s: %d orders, %d early polls refused, %d forged passes refused, %d bypassed, %d bot entries shadowed, %d gateway checks",
		herdSize, time.Since(began).Round(time.Millisecond), orders.Load(), herd.early.Load(), herd.forged.Load(), herd.bypassed.Load(), herd.shadowed.Load(), herd.checks.Load())
	// Two more scrapes of everything, so that the herd's last moments are in.
	time.Sleep(3 * time.Second)
	end := time.Now()

	roomVars := func(name string) *strings.Replacer {
		return strings.NewReplacer("$namespace", roomNamespace, "$name", name,
			// Grafana's $__rate_interval is at least four scrape intervals.
			"$__rate_interval", "4s", "$__range", strconv.Itoa(int(end.Sub(began).Seconds())+1)+"s",
			"${wait_objective}", "300", "$wait_objective", "300")
	}
	vars := roomVars(roomName)
	queried, row := 0, ""
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = p.Title
		}
		// The Gateway row shows what only a room its gateway enforces has.
		panelVars := vars
		if row == "Gateway" {
			panelVars = roomVars(gatewayRoomName)
		}
		for _, tg := range p.Targets {
			expr := panelVars.Replace(tg.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: a variable the test does not fill in: %s", p.Title, expr)
				continue
			}
			series, err := prom.QueryRange(ctx, expr, began, end, time.Second)
			if err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
				continue
			}
			queried++
			if !anyValue(series) {
				t.Errorf("panel %q returned no data during the herd: %s", p.Title, expr)
			}
		}
	}
	t.Logf("%d queries of %d panels returned data", queried, len(d.Panels))

	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		label, match, ok := labelValues(vars.Replace(v.Definition))
		if !ok {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		values, err := prom.LabelValues(ctx, label, match)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"namespace": roomNamespace, "name": roomName}[v.Name]
		if !slices.Contains(values, want) {
			t.Errorf("variable %s offers %v, not the room's %q", v.Name, values, want)
		}
	}

	// What the panels show beside what the herd did.
	last := func(expr string) float64 {
		t.Helper()
		series, err := prom.QueryRange(ctx, vars.Replace(expr), end.Add(-2*time.Second), end, time.Second)
		if err != nil || len(series) != 1 || len(series[0].Values) == 0 {
			t.Fatalf("%s: %v %v", expr, series, err)
		}
		v, _ := strconv.ParseFloat(series[0].Values[len(series[0].Values)-1][1].(string), 64)
		return v
	}
	for _, c := range []struct {
		expr string
		want float64
	}{
		{`sum(herdgate_max_active{namespace="$namespace", name="$name"})`, maxActive},
		{`sum(herdgate_planned_admission_rate{namespace="$namespace", name="$name"})`, plannedRate},
		{`sum(herdgate_proxies_reporting{namespace="$namespace", name="$name"})`, 2},
		{`count(herdgate_proxy_redis_up{waitingqueue="$namespace/$name"} == 1)`, 2},
		{`sum(herdgate_proxy_bypass_requests_total{waitingqueue="$namespace/$name", rule="` + bypassRule + `"})`, float64(herd.bypassed.Load())},
		{`sum(herdgate_proxy_too_early_total{waitingqueue="$namespace/$name"})`, float64(herd.early.Load())},
	} {
		if got := last(c.expr); got != c.want {
			t.Errorf("%s = %v, want %v", c.expr, got, c.want)
		}
	}
	// Everyone of the herd was admitted, and the bot's real places at most (silent, they may have
	// been dropped first); the members' lane admitted some of its visitors (others came in at once).
	admitted := last(`sum(herdgate_admitted_total{namespace="$namespace", name="$name"}) + sum(herdgate_admitted_at_once_total{namespace="$namespace", name="$name"})`)
	if admitted < herdSize || admitted > float64(herdSize+herd.botPlaces.Load()) {
		t.Errorf("admitted %v, want the herd's %d and at most the bot's %d places more", admitted, herdSize, herd.botPlaces.Load())
	}
	if members := last(`sum(herdgate_lane_admitted_total{namespace="$namespace", name="$name", lane="members"})`); members < 1 || members > herdSize/memberEvery {
		t.Errorf("the members' lane admitted %v, want 1 to %d", members, herdSize/memberEvery)
	}
	// The scheduler reads a drained room's counters when it wakes, at least every 10 s: the last
	// shadow places reach the metric within that.
	shadowed := `sum(herdgate_shadowed_total{namespace="$namespace", name="$name", reason="over_entry_limit"})`
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Second) {
		series, err := prom.QueryRange(ctx, vars.Replace(shadowed), time.Now().Add(-2*time.Second), time.Now(), time.Second)
		if err == nil && len(series) == 1 && len(series[0].Values) > 0 &&
			series[0].Values[len(series[0].Values)-1][1] == strconv.FormatInt(herd.shadowed.Load(), 10) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s = %v (%v), want the bot's %d shadow places", shadowed, series, err, herd.shadowed.Load())
			break
		}
	}
	if herd.shadowed.Load() == 0 || herd.checks.Load() == 0 {
		t.Errorf("the bot took %d shadow places and the gateway asked %d checks; want some of each", herd.shadowed.Load(), herd.checks.Load())
	}
}

// herdCounts are what the herd did beyond its visitors' orders.
type herdCounts struct {
	early, forged, bypassed, shadowed, checks atomic.Int64
	// botPlaces are the real places the bot took before its limit refused it.
	botPlaces atomic.Int64
}

// memberEvery: every memberEvery-th visitor of the herd waits in the members' lane.
const memberEvery = 5

// runHerd sends herdSize visitors through the proxies in turn, entering over two seconds, each from
// an address of its own, and beside them, every 200 ms until the last visitor ordered, a forged pass,
// an order through the bypass lane, a bot's entry from one address, and a gateway's check of an
// order in the Gateway room.
func runHerd(t *testing.T, proxies []string, gatewayProxy string) *herdCounts {
	t.Helper()
	counts := &herdCounts{}
	var wg sync.WaitGroup
	errs := make(chan error, herdSize)
	for i := range herdSize {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 2 * time.Second / herdSize)
			headers := []string{"X-Forwarded-For", fmt.Sprintf("10.1.%d.%d", i/256, i%256)}
			if i%memberEvery == 0 {
				headers = append(headers, memberHeader, memberValue)
			}
			if err := visit(proxies[i%len(proxies)], fmt.Sprintf("visitor-%03d", i), counts, headers...); err != nil {
				errs <- err
			}
		})
	}
	done := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() {
		limited := false
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			proxy := proxies[i%len(proxies)]
			if code, _, err := call(http.MethodPost, proxy+"/api/v1/orders", fmt.Sprintf("forger-%d", i), "v1.forged.pass"); err == nil && code == http.StatusForbidden {
				counts.forged.Add(1)
			}
			if code, _, err := call(http.MethodPost, proxy+"/api/v1/orders/direct", fmt.Sprintf("partner-%d", i), ""); err == nil && code == http.StatusOK {
				counts.bypassed.Add(1)
			}
			// The bot takes its burst of real places, is refused, and past twice its burst its
			// entries take shadow places, which read as places.
			switch code, body, err := call(http.MethodPost, proxy+"/.herdgate/enter", fmt.Sprintf("bot-%d", i), "", "X-Forwarded-For", botAddress); {
			case err != nil:
			case code == http.StatusTooManyRequests:
				limited = true
			case code == http.StatusOK && !limited:
				counts.botPlaces.Add(1)
			case code == http.StatusOK && body["position"] != nil:
				counts.shadowed.Add(1)
			}
			if code, _, err := call(http.MethodGet, gatewayProxy+"/.herdgate/check", fmt.Sprintf("shopper-%d", i), "",
				"X-Original-URI", "/api/v1/orders", "X-Original-Method", http.MethodPost); err == nil && code != http.StatusOK {
				counts.checks.Add(1)
			}
		}
	})
	wg.Wait()
	close(done)
	side.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return counts
}

// visit enters, polls once at once (refused as too early), then as told until admitted, and orders
// with the pass. It keeps the cookies the proxy sets, as a browser does: the wait it was told first
// is judged at its admission.
func visit(proxy, id string, counts *herdCounts, headers ...string) error {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	client := &http.Client{Jar: jar}
	call := func(method, url, id, pass string, headers ...string) (int, map[string]any, error) {
		return callWith(client, method, url, id, pass, headers...)
	}
	code, body, err := call(http.MethodPost, proxy+"/.herdgate/enter", id, "", headers...)
	if err != nil {
		return err
	}
	if code == http.StatusOK && body["admitted"] != true {
		if early, _, err := call(http.MethodGet, proxy+"/.herdgate/status", id, ""); err == nil && early == http.StatusTooManyRequests {
			counts.early.Add(1)
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); err == nil; code, body, err = call(http.MethodGet, proxy+"/.herdgate/status", id, "") {
		if code == http.StatusOK && body["admitted"] == true {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was never admitted: %d %v", id, code, body)
		}
		wait, _ := body["nextPollMs"].(float64)
		if code == http.StatusTooManyRequests {
			wait, _ = body["retryAfterMs"].(float64)
		}
		time.Sleep(time.Duration(max(wait, 50)) * time.Millisecond)
	}
	if err != nil {
		return err
	}
	pass, _ := body["pass"].(string)
	if code, _, err = call(http.MethodPost, proxy+"/api/v1/orders", id, pass); err != nil {
		return fmt.Errorf("%s's order: %w", id, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s's order: %d", id, code)
	}
	return nil
}

// call sends a request as visitor id with its pass (none when ""), and headers as name, value pairs.
func call(method, url, id, pass string, headers ...string) (int, map[string]any, error) {
	return callWith(http.DefaultClient, method, url, id, pass, headers...)
}

// callWith is call on client.
func callWith(client *http.Client, method, url, id, pass string, headers ...string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-User-Id", id)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if pass != "" {
		req.Header.Set(admission.PassHeader, pass)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body := map[string]any{}
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body, nil
}

// anyValue says whether one of the series has a number (not NaN, which a quantile of no
// observations is) at some step.
func anyValue(series []testenv.Series) bool {
	for _, s := range series {
		for _, v := range s.Values {
			text, _ := v[1].(string)
			if f, err := strconv.ParseFloat(text, 64); err == nil && !math.IsNaN(f) {
				return true
			}
		}
	}
	return false
}

// labelValues reads Grafana's label_values(selector, label).
func labelValues(definition string) (label, match string, ok bool) {
	inner, ok := strings.CutPrefix(definition, "label_values(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return "", "", false
	}
	inner = strings.TrimSuffix(inner, ")")
	i := strings.LastIndex(inner, ",")
	if i < 0 {
		return "", "", false
	}
	return strings.TrimSpace(inner[i+1:]), strings.TrimSpace(inner[:i]), true
}

// proxyAddresses are where a proxy of the test serves visitors and its metrics.
type proxyAddresses struct{ visitors, metrics string }

// startProxy runs the herdgate-proxy binary as replica of the room wq, with the room's Secret as the
// operator writes it, mounted as files, and waits until it is ready.
func startProxy(t *testing.T, cp *controlplane.ControlPlane, bins, kubeconfig, redisURL string, wq *herdgatev1alpha1.WaitingQueue, replica string) proxyAddresses {
	t.Helper()
	secret := &corev1.Secret{}
	// The operator writes the HMAC key, then the values the spec refers to (a lane's header value).
	want := 1 + len(wq.Spec.Lanes)
	waitFor(t, wq.Name+"'s Secret", func() bool {
		err := cp.Client.Get(t.Context(), types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)
		return err == nil && len(secret.Data[herdgatev1alpha1.SecretHMACKey]) == 32 && len(secret.Data) >= want
	})
	secretDir := t.TempDir()
	for key, value := range secret.Data {
		if err := os.WriteFile(filepath.Join(secretDir, key), value, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addrs := proxyAddresses{visitors: freeAddress(t), metrics: freeAddress(t)}
	start(t, replica, filepath.Join(bins, "herdgate-proxy"), nil,
		"--waitingqueue="+wq.Namespace+"/"+wq.Name, "--kubeconfig="+kubeconfig, "--redis-url="+redisURL,
		"--hmac-key-file="+filepath.Join(secretDir, herdgatev1alpha1.SecretHMACKey), "--replica="+replica,
		"--listen="+addrs.visitors, "--metrics-listen="+addrs.metrics,
		"--drain-delay=0s", "--shutdown-timeout=2s", "--zap-log-level=error")
	waitFor(t, replica+" ready", func() bool {
		res, err := http.Get("http://" + addrs.visitors + "/.herdgate/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return addrs
}

// start runs a binary of the test until it ends, and shows its log when the test failed.
func start(t *testing.T, name, bin string, env []string, args ...string) {
	t.Helper()
	logs, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			out, _ := os.ReadFile(logs.Name())
			t.Logf("%s's log:\n%s", name, out)
		}
	})
}

func freeAddress(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
	}
}
