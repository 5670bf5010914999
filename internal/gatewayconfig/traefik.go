package gatewayconfig

import (
	"fmt"
	"strings"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// Traefik's chain, in order: the headers a visitor must not choose dropped, the check, the busy
// answer of herdgate for what the cap refuses, and the cap itself (the second line). The cap comes
// after the check, so that requests without a pass never use the workload's share.
//
// InFlightReq counts per source; its source here is a header the first middleware always removes,
// so that every request of the room counts against one cap and no visitor can choose another.
const poolHeader = "X-Herdgate-Pool"

// traefik is the Middlewares to attach to the workload's IngressRoute: orders-herdgate, the chain.
func traefik(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]map[string]any, error) {
	limit, err := WorkloadCap(wq, opts.replicas())
	if err != nil {
		return nil, err
	}
	dropped := map[string]any{poolHeader: ""}
	for _, h := range otherConventionHeaders {
		dropped[h] = ""
	}
	prefix := wq.Name + "-herdgate"
	middleware := func(suffix string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware", "metadata": meta(wq, prefix+suffix), "spec": spec}
	}
	var chain []any
	for _, suffix := range []string{"-headers", "-check", "-busy", "-pool"} {
		chain = append(chain, map[string]any{"name": prefix + suffix})
	}
	return []map[string]any{
		middleware("", map[string]any{"chain": map[string]any{"middlewares": chain}}),
		middleware("-headers", map[string]any{"headers": map[string]any{"customRequestHeaders": dropped}}),
		middleware("-check", map[string]any{"forwardAuth": map[string]any{
			"address":             fmt.Sprintf("http://%s.%s.svc/.herdgate/check", wq.ServiceName(), wq.Namespace),
			"authResponseHeaders": toAny(append([]string{"Cookie"}, herdgateHeaders...)),
		}}),
		middleware("-busy", map[string]any{"errors": map[string]any{
			"status":         []any{"429"},
			"statusRewrites": map[string]any{"429": int64(503)},
			"service":        map[string]any{"name": wq.ServiceName(), "port": int64(80)},
			"query":          busyPath,
		}}),
		middleware("-pool", map[string]any{"inFlightReq": map[string]any{
			"amount":          limit,
			"sourceCriterion": map[string]any{"requestHeaderName": poolHeader},
		}}),
	}, nil
}

// otherConventionHeaders are nginx's names of the request to check, which Traefik passes on from
// the visitor unless a Middleware drops them (an empty value removes a header).
var otherConventionHeaders = []string{"X-Original-URI", "X-Original-Method", "X-Original-Host"}

// traefikFile is the same chain in Traefik's file provider (its dynamic configuration), with the
// routers and services of herdgate's paths and the workload's.
func traefikFile(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]byte, error) {
	at, err := siteOf(wq, opts, "")
	if err != nil {
		return nil, err
	}
	return []byte(strings.NewReplacer(
		"ROOM", wq.Name, "HERDGATE_SERVER", at.herdgate, "WORKLOAD_SERVER", at.workload, "CAP", fmt.Sprint(at.limit),
		"POOL_HEADER", poolHeader, "BUSY", busyPath, "RESPONSE_HEADERS", strings.Join(append([]string{"Cookie"}, herdgateHeaders...), ", "),
	).Replace(traefikFileTemplate)), nil
}

const traefikFileTemplate = `http:
  routers:
    ROOM-herdgate:
      rule: PathPrefix(` + "`/.herdgate/`" + `)
      priority: 100
      service: ROOM-herdgate
    ROOM-workload:
      rule: PathPrefix(` + "`/`" + `)
      priority: 1
      middlewares: [ROOM-herdgate-headers, ROOM-herdgate-check, ROOM-herdgate-busy, ROOM-herdgate-pool]
      service: ROOM-workload
  middlewares:
    # A visitor's own X-Original-* would name another request: the check refuses both. POOL_HEADER
    # is the cap's one source: removed here, every request counts against the same cap.
    ROOM-herdgate-headers:
      headers:
        customRequestHeaders:
          X-Original-URI: ""
          X-Original-Method: ""
          X-Original-Host: ""
          POOL_HEADER: ""
    ROOM-herdgate-check:
      forwardAuth:
        address: http://HERDGATE_SERVER/.herdgate/check
        authResponseHeaders: [RESPONSE_HEADERS]
    # What the cap refuses is herdgate's busy answer: 503 with Retry-After, counted.
    ROOM-herdgate-busy:
      errors:
        status: ["429"]
        statusRewrites: {"429": 503}
        service: ROOM-herdgate
        query: BUSY
    # The second line: at most CAP requests in flight to the workload from this Traefik.
    ROOM-herdgate-pool:
      inFlightReq:
        amount: CAP
        sourceCriterion:
          requestHeaderName: POOL_HEADER
  services:
    ROOM-herdgate:
      loadBalancer:
        servers: [{url: "http://HERDGATE_SERVER"}]
    ROOM-workload:
      loadBalancer:
        servers: [{url: "http://WORKLOAD_SERVER"}]
`
