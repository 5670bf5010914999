package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/gatewayconfig"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// target is one path the protected POST is sent through: its own wrk script when its pass is not
// the proxy's HMAC pass, the process group whose CPU is its own, and whether it asks
// herdgate-proxy's check, whose CPU is then counted beside its own.
type target struct {
	name, url, script string
	pgid              int
	check             bool
}

const (
	haproxyName      = "HAProxy"
	haproxyES256Name = "HAProxy + jwt_verify, ES256 pass"
	haproxyHS256Name = "HAProxy + jwt_verify, HS256 pass"
)

// processes are the gateways a bench started, each stopped by stop.
type processes []interface{ Stop() }

func (ps *processes) stop() {
	for _, p := range *ps {
		p.Stop()
	}
}

// gatewayQueue is the bench's room as a gateway enforces it, its workload the backend at backend.
func gatewayQueue(backend string) *builder.QueueBuilder {
	return builder.Queue("bench", "orders").UpstreamURL("http://" + backend).Routes(builder.Route("/api/v1/orders", false, "POST")).
		Enforcement(herdgatev1alpha1.EnforcementGateway)
}

// startHAProxies starts HAProxy alone in front of the backend, and HAProxy verifying herdgate's
// JWT passes with the configuration `herd gateway-config --target haproxy` prints: once with the
// ES256 keys as published, once with its jwt_verify lines on HS256 secrets.
func startHAProxies(dir string, backendPort, proxyPort int) ([]target, func(), error) {
	var procs processes
	backend := fmt.Sprintf("127.0.0.1:%d", backendPort)
	wq := gatewayQueue(backend).JWTPasses(herdgatev1alpha1.PassAlgorithmES256, 0).Obj()
	stop := procs.stop
	now := time.Now()
	var targets []target
	start := func(name, config, token string) error {
		port := freePort()
		config = strings.ReplaceAll(config, "LISTEN_ADDRESS", fmt.Sprintf("127.0.0.1:%d", port))
		sub := filepath.Join(dir, strings.NewReplacer(" ", "-", "+", "", ",", "").Replace(name))
		p, err := testenv.StartHAProxy(sub, config)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		script := filepath.Join(sub, "post.lua")
		if err := os.WriteFile(script, []byte(fmt.Sprintf(`wrk.method = "POST"
wrk.body = '{"item":1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers[%q] = %q
`, admission.PassHeader, token)), 0o644); err != nil {
			return err
		}
		targets = append(targets, target{name: name, url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", port), script: script, pgid: p.PGID()})
		return nil
	}
	alone := fmt.Sprintf("frontend site\n  bind LISTEN_ADDRESS\n  default_backend workload\nbackend workload\n  server workload %s\n", backend)
	if err := start(haproxyName, alone, "none"); err != nil {
		return nil, stop, err
	}
	for _, alg := range []pass.Algorithm{pass.ES256, pass.HS256} {
		keys := &pass.KeySet{}
		if _, err := keys.Rotate(now, pass.Rotation{Algorithm: alg, Every: 24 * time.Hour, Keep: time.Hour}); err != nil {
			return nil, stop, err
		}
		keysDir := filepath.Join(dir, "keys-"+string(alg))
		if err := os.MkdirAll(keysDir, 0o755); err != nil {
			return nil, stop, err
		}
		config, err := gatewayconfig.Render(wq, gatewayconfig.Options{Target: "haproxy", Listen: "LISTEN_ADDRESS",
			HerdgateAddress: fmt.Sprintf("127.0.0.1:%d", proxyPort), WorkloadAddress: backend, KeysDir: keysDir})
		if err != nil {
			return nil, stop, err
		}
		pems, err := keys.PublicPEMs(now)
		if err != nil {
			return nil, stop, err
		}
		for slot, pem := range pems { // none for HS256
			if err := os.WriteFile(filepath.Join(keysDir, slot+".pem"), pem, 0o644); err != nil {
				return nil, stop, err
			}
		}
		text := string(config)
		if alg == pass.HS256 {
			previous, current, next := keys.Slots(now)
			for slot, k := range map[string]*pass.Key{pass.SlotPrevious: previous, pass.SlotCurrent: current, pass.SlotNext: next} {
				text = strings.ReplaceAll(text, fmt.Sprintf(`jwt_verify("ES256","%s/%s.pem")`, keysDir, slot), fmt.Sprintf(`jwt_verify("HS256","%s")`, k.Secret()))
			}
		}
		passes, err := pass.NewJWTPasses("bench/orders", keys, time.Now)
		if err != nil {
			return nil, stop, err
		}
		token := passes.Issue("bench-visitor", now.Add(-time.Minute), now.Add(time.Hour))
		name := haproxyES256Name
		if alg == pass.HS256 {
			name = haproxyHS256Name
		}
		if err := start(name, text, token); err != nil {
			return nil, stop, err
		}
	}
	return targets, stop, nil
}

// grpcCheckAtLoad calls the proxy's gRPC check with a protected POST carrying a valid pass from
// conns callers for d, as Envoy's ext_authz filter would, and reports the rate and latencies.
func grpcCheckAtLoad(addr, token string, conns int, d time.Duration) (wrkResult, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return wrkResult{}, err
	}
	defer conn.Close()
	client := authv3.NewAuthorizationClient(conn)
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "POST", Path: "/api/v1/orders", Host: "bench", Scheme: "http",
			Headers: map[string]string{strings.ToLower(admission.PassHeader): token, "content-type": "application/json"}}},
	}}
	var mu sync.Mutex
	var latencies []time.Duration
	var failed error
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var own []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				res, err := client.Check(context.Background(), req)
				if err == nil && res.GetStatus().GetCode() != int32(code.Code_OK) {
					err = fmt.Errorf("the check refused a valid pass: %v", res.GetStatus())
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if failed != nil {
		return wrkResult{}, failed
	}
	slices.Sort(latencies)
	if len(latencies) == 0 {
		return wrkResult{}, fmt.Errorf("no check answered")
	}
	return wrkResult{
		rps: float64(len(latencies)) / d.Seconds(), requests: int64(len(latencies)),
		p50: latencies[len(latencies)/2], p99: latencies[len(latencies)*99/100],
	}, nil
}
