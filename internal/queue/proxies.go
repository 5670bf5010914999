package queue

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

var (
	//go:embed lua/proxies.lua
	proxiesLua    string
	proxiesScript = newScript(proxiesLua)
)

// MaxProxyReportBytes bounds one replica's report; a longer refusal message is cut.
const MaxProxyReportBytes = 2048

// ProxyReport is what one admission proxy replica says of the config it serves.
type ProxyReport struct {
	// Replica names the proxy replica (its pod).
	Replica string `json:"-"`
	// Generation is the WaitingQueue generation of the config the replica serves; 0 before it has one.
	Generation int64 `json:"generation"`
	// RefusedGeneration, when not 0, is a newer generation the replica could not apply, and Refusal why.
	RefusedGeneration int64  `json:"refusedGeneration,omitempty"`
	Refusal           string `json:"refusal,omitempty"`
	// ChecksPerSecond is how many gateway checks (forward auth, ext_authz) about requests outside
	// /.herdgate/ the replica answered per second since its report before, which tells a Gateway
	// room whether its gateway asks at all.
	ChecksPerSecond float64 `json:"checksPerSecond,omitempty"`
}

// ReportProxy records r, replacing the replica's previous report.
func (q *Queue) ReportProxy(ctx context.Context, r ProxyReport) error {
	if r.Replica == "" || len(r.Replica) > 253 {
		return fmt.Errorf("reporting to queue %s: replica name %q is empty or longer than 253 bytes", q.prefix, r.Replica)
	}
	if len(r.Refusal) > MaxProxyReportBytes {
		r.Refusal = strings.ToValidUTF8(r.Refusal[:MaxProxyReportBytes], "")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := proxiesScript.Run(ctx, q.rdb, []string{q.keys.proxies}, "report", r.Replica, string(body)).Err(); err != nil {
		return fmt.Errorf("reporting to queue %s: %w", q.prefix, err)
	}
	return nil
}

// ProxyReports returns the reports of the replicas that reported within maxAge (by Redis' clock),
// ordered by replica, and deletes the older ones: replicas that are gone.
func (q *Queue) ProxyReports(ctx context.Context, maxAge time.Duration) ([]ProxyReport, error) {
	raw, err := proxiesScript.Run(ctx, q.rdb, []string{q.keys.proxies}, "read", maxAge.Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("reading proxy reports of queue %s: %w", q.prefix, err)
	}
	return parseProxyReports(raw)
}

func parseProxyReports(raw []any) ([]ProxyReport, error) {
	if len(raw) < 1 || len(raw)%2 != 1 {
		return nil, fmt.Errorf("unexpected proxy reports reply %v", raw)
	}
	out := make([]ProxyReport, 0, len(raw)/2)
	for i := 1; i < len(raw); i += 2 {
		name, _ := raw[i].(string)
		body, _ := raw[i+1].(string)
		r := ProxyReport{}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			continue // not a report this version writes
		}
		r.Replica = name
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b ProxyReport) int { return strings.Compare(a.Replica, b.Replica) })
	return out, nil
}
