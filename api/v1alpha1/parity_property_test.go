package v1alpha1_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// The parity property: one validation, two enforcers, checked on generated specs rather than on a list
// of cases. Every spec field has a pool of values (valid ones, values at and beyond every limit, and
// the spellings a hostile client tries); a spec changes one field, or several at once, from the
// sample. For each spec:
//
//   - what the API server accepts, the admission proxy serves: the object as stored (defaults and
//     all) decodes as the proxy's watch decodes it and makes a config (admission.NewConfigWithSecrets,
//     the checks the manager runs too);
//   - on the typed spec the proxy works with, the verdicts agree both ways: the API server given that
//     spec (as Go writes it) accepts it exactly when the proxy's config check does. A raw spelling the
//     proxy cannot decode at all (a time of hour 25) must be refused by the API server.
//
// The API server may be stricter than Go's decoder on spelling alone (a duration written with the
// Greek mu, which Go takes for the micro sign): such a spec never reaches a proxy, and its Go form is
// held to the first two rules.

// absent removes a field.
type absentValue struct{}

var absent = absentValue{}

// fieldPools are the values each spec field is tried with, by path (a "[]" stands for an element of a
// list). Every leaf of the CRD's spec schema has one; a test below holds the two together.
var fieldPools = map[string][]any{
	// Whole capacities, for the checks that compare its fields (an Adaptive floor against the plan).
	"capacity": {
		map[string]any{"poolSize": 40, "requestLatency": "200ms", "mode": "Adaptive", "minAdmissionsPerSecond": 141},
		map[string]any{"poolSize": 40, "requestLatency": "200ms", "mode": "Adaptive", "minAdmissionsPerSecond": 140},
		map[string]any{"poolSize": 1, "requestLatency": "10m", "mode": "Adaptive", "minAdmissionsPerSecond": 1},
		map[string]any{"poolSize": 1000000, "requestLatency": "1ms", "utilizationPercent": 100, "mode": "Adaptive", "minAdmissionsPerSecond": 1000000},
		map[string]any{"poolSize": 40, "requestLatency": "200ms", "batchSizeOverride": 1, "mode": "Adaptive", "minAdmissionsPerSecond": 11},
		map[string]any{"poolSize": 40, "requestLatency": "200ms", "maxActive": 1, "mode": "Adaptive"},
		map[string]any{"requestLatency": "200ms"}, map[string]any{"poolSize": 40}, map[string]any{}, absent,
	},
	"capacity.poolSize":                          ints(0, 1, 40, 1000000, 1000001, -1),
	"capacity.requestLatency":                    durations("1ms", "200ms", "10m", "10m0.000000001s", "0.9ms"),
	"capacity.utilizationPercent":                append(ints(0, 1, 70, 100, 101), absent),
	"capacity.batchSizeOverride":                 append(ints(0, 1, 14, 1000000, 1000001), absent),
	"capacity.maxActive":                         append(ints(0, 1, 50, 10000000, 10000001), absent),
	"capacity.mode":                              {"Declared", "Adaptive", "adaptive", "", absent},
	"capacity.minAdmissionsPerSecond":            append(ints(-1, 0, 1, 14, 140, 141, 1000000, 1000001), absent),
	"tick":                                       append(durations("10ms", "100ms", "10s", "9ms", "10.000001s"), absent),
	"jitter.mode":                                {"Uniform", "None", "uniform", absent},
	"jitter.window":                              append(durations("0s", "50ms", "100ms", "101ms"), absent),
	"pass.format":                                {"HMAC", "JWT", "jwt", "", absent},
	"pass.algorithm":                             {"ES256", "HS256", "RS256", "none", "", absent},
	"pass.keyRotation":                           append(durations("1h", "168h", "2160h", "59m", "2160h0m1s"), absent),
	"pass.ttl":                                   append(durations("10s", "5m", "24h", "9s", "24h0m1s"), absent),
	"pass.renewal":                               {"Fixed", "Sliding", "sliding", absent},
	"pass.maxSession":                            append(durations("5m", "1h", "24h", "4m59s", "25h"), absent),
	"pass.completionRoutes":                      {absent, []any{}, []any{map[string]any{"path": "/thanks"}}, repeat(map[string]any{"path": "/thanks"}, 9)},
	"pass.completionRoutes[].methods":            methodLists(),
	"pass.completionRoutes[].path":               routePaths(),
	"pass.completionRoutes[].pathPrefix":         append(routePaths(), absent),
	"pass.completionRoutes[].exactCase":          {true, false, absent},
	"polling.minInterval":                        append(durations("100ms", "500ms", "10m", "99ms", "11m"), absent),
	"polling.maxInterval":                        append(durations("100ms", "5s", "10m", "99ms", "11m"), absent),
	"polling.budget":                             append(ints(0, 1, 20000, 10000000, 10000001), absent),
	"polling.exactPositions":                     append(ints(4999, 5000, 10000, 100000000, 100000001), absent),
	"abandonAfter":                               append(durations("10s", "5m", "24h", "9s", "24h1s"), absent),
	"abandonAtTurnAfter":                         append(durations("1s", "10s", "5m", "500ms", "24h1s"), absent),
	"suspend":                                    {true, false, absent},
	"mode":                                       {"Queue", "Passthrough", "Closed", "closed", "", absent},
	"enforcement":                                {"Proxy", "Gateway", "gateway", "", absent},
	"schedule":                                   {absent},
	"schedule.opensAt":                           times(),
	"schedule.preQueueFrom":                      append(times(), absent),
	"schedule.closesAt":                          append(times(), absent),
	"draw.seedSource":                            drawSeedSources(),
	"draw.beacon.url":                            urls(),
	"draw.beacon.chainHash":                      chainHashes(),
	"draw.beacon.maxWait":                        append(durations("1s", "1m", "1h", "999ms", "1h0m1s"), absent),
	"entry.perClient.burst":                      append(ints(0, 1, 10, 100000, 100001), absent),
	"entry.perClient.perMinute":                  append(ints(0, 1, 30, 600000, 600001), absent),
	"entry.perClient.ipv4PrefixLength":           append(ints(7, 8, 24, 32, 33), absent),
	"entry.perClient.ipv6PrefixLength":           append(ints(15, 16, 64, 128, 129), absent),
	"entry.perClient.pollsPerSecond":             append(ints(0, 1, 50, 100000, 100001), absent),
	"entry.trustedProxies":                       cidrLists(),
	"pass.releaseKeySecretRef.name":              secretNames(),
	"pass.releaseKeySecretRef.key":               secretKeys(),
	"entry.invitation.keySecretRef.name":         secretNames(),
	"entry.invitation.keySecretRef.key":          secretKeys(),
	"entry.invitation.singleUse":                 {true, false, absent},
	"entry.challenge.proofOfWork.difficulty":     append(ints(0, 1, 16, 24, 25), absent),
	"entry.challenge.proofOfWork.raiseAbove":     append(ints(0, 1, 200, 1000000, 1000001), absent),
	"entry.challenge.proofOfWork.maxDifficulty":  append(ints(0, 15, 16, 20, 24, 25), absent),
	"entry.challenge.external.verifyURL":         urls(),
	"entry.challenge.external.secretKeyRef.name": secretNames(),
	"entry.challenge.external.secretKeyRef.key":  secretKeys(),
	"entry.challenge.external.timeout":           append(durations("100ms", "3s", "30s", "99ms", "31s"), absent),
	"entry.shadowQueue.challengeFailed":          {true, false, absent},
	"entry.shadowQueue.overEntryLimitFactor":     append(ints(1, 2, 3, 100, 101), absent),
	"bypass[].name":                              {"office", "a", "Office", "-a", "a-", "a_b", strings.Repeat("a", 63), strings.Repeat("a", 64)},
	"bypass[].sourceCIDRs":                       cidrLists(),
	"bypass[].header.name":                       headerNames(),
	"bypass[].header.valueSecretRef.name":        secretNames(),
	"bypass[].header.valueSecretRef.key":         secretKeys(),
	"bypass[].path":                              append(routePaths(), absent),
	"bypass[].pathPrefix":                        append(routePaths(), absent),
	"events": {absent, []any{}, distinctEvents(16), distinctEvents(17),
		[]any{event("a", "2027-03-01T11:00:00Z", "2027-03-01T12:00:00Z"), event("b", "2027-03-01T11:30:00Z", "2027-03-01T13:00:00Z")},
		[]any{event("a", "2027-03-01T11:00:00Z", "2027-03-01T12:00:00Z"), event("b", "2027-03-01T12:00:00Z", "2027-03-01T13:00:00Z")},
		[]any{event("a", "2027-03-01T11:00:00Z", "2027-03-01T12:00:00Z"), event("a", "2027-03-01T13:00:00Z", "2027-03-01T14:00:00Z")},
		[]any{event("a", "2027-03-01T11:00:00Z", "2027-03-01T12:00:00Z"), withPreQueue(event("b", "2027-03-01T13:00:00Z", "2027-03-01T14:00:00Z"), "2027-03-01T11:59:59Z")},
		[]any{event("a", "2027-03-01T11:00:00Z", "2027-03-01T12:00:00Z"), withPreQueue(event("b", "2027-03-01T13:00:00Z", "2027-03-01T14:00:00Z"), "2027-03-01T12:00:00Z")}},
	"events[].name":                        {"sale", "s", "a-b", "Sale", "-a", "a-", "a_b", strings.Repeat("a", 63), strings.Repeat("a", 64), ""},
	"events[].start":                       times(),
	"events[].end":                         times(),
	"events[].preQueueFrom":                append(times(), absent),
	"events[].capacity.poolSize":           append(ints(0, 1, 80, 1000000, 1000001, -1), absent),
	"events[].capacity.requestLatency":     append(durations("1ms", "200ms", "10m", "10m0.000000001s", "0.9ms"), absent),
	"events[].capacity.utilizationPercent": append(ints(0, 1, 70, 100, 101), absent),
	"events[].capacity.batchSizeOverride":  append(ints(0, 1, 28, 1000000, 1000001), absent),
	"events[].maxActive":                   append(ints(-1, 0, 1, 500, 10000000, 10000001), absent),
	"events[].page.template.name":          secretNames(),
	"events[].page.template.key":           secretKeys(),
	"events[].page.message":                {"", "The sale is on", strings.Repeat("가", 500), strings.Repeat("가", 501), strings.Repeat("a", 501), absent},
	"events[].session.ttl":                 append(durations("10s", "5m", "24h", "9s", "24h0m1s"), absent),
	"events[].session.maxSession":          append(durations("5m", "1h", "24h", "4m59s", "25h"), absent),
	"events[].draw.seedSource":             drawSeedSources(),
	"events[].draw.beacon.url":             urls(),
	"events[].draw.beacon.chainHash":       chainHashes(),
	"events[].draw.beacon.maxWait":         append(durations("1s", "30s", "1h", "0s", "2h"), absent),
	"lanes": {absent, []any{}, distinctLanes(8, 12), distinctLanes(9, 10), distinctLanes(2, 50), distinctLanes(3, 33),
		[]any{lane("members", 20), lane("members", 30)}},
	"lanes[].name":                            {"members", "m", "a-b", "main", "Members", "-a", "a-", "a_b", strings.Repeat("a", 63), strings.Repeat("a", 64), ""},
	"lanes[].weightPercent":                   ints(-1, 0, 1, 20, 99, 100),
	"lanes[].join":                            {map[string]any{}, map[string]any{"invitation": false}},
	"lanes[].join.code.keySecretRef.name":     secretNames(),
	"lanes[].join.code.keySecretRef.key":      secretKeys(),
	"lanes[].join.invitation":                 {true, false, absent},
	"lanes[].join.header.name":                headerNames(),
	"lanes[].join.header.valueSecretRef.name": secretNames(),
	"lanes[].join.header.valueSecretRef.key":  secretKeys(),
	"lanes[].join.cookie.name":                {"member", "m", "a.b", "member-tier", "herdgate_pass", "Herdgate_x", "a b", "a;b", "a=b", "ä", strings.Repeat("c", 128), strings.Repeat("c", 129), ""},
	"lanes[].join.cookie.valueSecretRef.name": secretNames(),
	"lanes[].join.cookie.valueSecretRef.key":  secretKeys(),
	"page.template.name":                      secretNames(),
	"page.template.key":                       secretKeys(),
	"page.message":                            {"", "Sales end at 18:00", strings.Repeat("가", 500), strings.Repeat("가", 501), strings.Repeat("a", 501), absent},
	"page.queueingStatusCode":                 append(ints(200, 202, 429, 0, 201, 503), absent),
	"upstream.service.name":                   {"orders", "o", "Orders", "1orders", "orders-", strings.Repeat("o", 63), strings.Repeat("o", 64), "", absent},
	"upstream.service.port":                   ints(0, 1, 8080, 65535, 65536, -1),
	"upstream.url":                            append(urls(), absent),
	"protectedRoutes": {[]any{}, distinctRoutes(32), distinctRoutes(33), repeat(map[string]any{"path": "/a"}, 2),
		[]any{map[string]any{"path": "/a", "methods": []any{"GET"}}, map[string]any{"path": "/a", "methods": []any{"POST"}}},
		[]any{map[string]any{"path": "/a", "methods": []any{"GET", "PUT"}}, map[string]any{"path": "/a", "methods": []any{"PUT"}}},
		[]any{map[string]any{"path": "/a"}, map[string]any{"pathPrefix": "/a"}},
		[]any{map[string]any{"path": "/a"}, map[string]any{"path": "/A"}},
		[]any{map[string]any{"path": "/a", "host": "a.example"}, map[string]any{"path": "/a", "host": "b.example"}},
		[]any{map[string]any{"path": "/a", "host": "a.example"}, map[string]any{"path": "/a"}},
		[]any{map[string]any{"path": "/a", "host": "a.example"}, map[string]any{"path": "/a", "host": "a.example"}}},
	"protectedRoutes[].host":                           routeHosts(),
	"pass.completionRoutes[].host":                     routeHosts(),
	"protectedRoutes[].methods":                        methodLists(),
	"protectedRoutes[].path":                           append(routePaths(), absent),
	"protectedRoutes[].pathPrefix":                     append(routePaths(), absent),
	"protectedRoutes[].exactCase":                      {true, false, absent},
	"identity.header":                                  headerNames(),
	"redis.secretRef.name":                             secretNames(),
	"redis.secretRef.key":                              append(secretKeys(), absent),
	"redis.secretRef":                                  {absent},
	"redis.durability":                                 {"Async", "Replicated", "replicated", "", absent},
	"proxy.replicas":                                   append(ints(-1, 0, 2, 1000, 1001), absent),
	"proxy.resources.requests":                         resourceLists(),
	"proxy.resources.limits":                           resourceLists(),
	"proxy.failurePolicy":                              {"FailClosed", "FailOpen", "failopen", "", absent},
	"proxy.shared":                                     {"pool", "p", "Pool", "-a", "a-", "a_b", "a.b", strings.Repeat("a", 40), strings.Repeat("a", 41), "", absent},
	"proxy.autoscaling.minReplicas":                    append(ints(-1, 0, 1, 2, 5, 1000, 1001), absent),
	"proxy.autoscaling.maxReplicas":                    ints(-1, 0, 1, 4, 1000, 1001),
	"proxy.autoscaling.targetCPUUtilizationPercentage": append(ints(0, 1, 70, 100, 101), absent),
	"proxy.hosts": {absent, []any{}, []any{"shop.example"}, []any{"a", "b.c", "1.2.3.4"}, []any{"Shop.example"}, []any{"shop.example:443"},
		[]any{"shop.example."}, []any{"-a.example"}, []any{"a..b"}, []any{""}, []any{"a.example", "a.example"},
		distinctHosts(16), distinctHosts(17), []any{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)},
		[]any{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62)}},
}

// Fields that only exist beside others: a value of theirs is tried in a spec that has the parent too.
var fieldParents = map[string]map[string]any{
	"schedule":                    {"opensAt": "2027-03-01T10:00:00Z"},
	"entry.invitation":            {"keySecretRef": map[string]any{"name": "invites", "key": "key"}},
	"entry.challenge.proofOfWork": {"difficulty": 16},
	"entry.challenge.external": {
		"verifyURL": "https://verify.example/siteverify", "secretKeyRef": map[string]any{"name": "captcha", "key": "secret"},
	},
	"page.template":          {"name": "shop-page", "key": "page.html"},
	"bypass[].header":        {"name": "X-Monitor-Token", "valueSecretRef": map[string]any{"name": "monitor", "key": "token"}},
	"events[].page.template": {"name": "sale-page", "key": "page.html"},
	"draw.beacon":            {"url": "https://beacon.example", "chainHash": strings.Repeat("5a", 32)},
	"events[].draw.beacon":   {"url": "https://beacon.example/mirror", "chainHash": strings.Repeat("0f", 32)},
	"lanes[].join.code":      {"keySecretRef": map[string]any{"name": "codes", "key": "key"}},
	"lanes[].join.header":    {"name": "X-Member-Tier", "valueSecretRef": map[string]any{"name": "members", "key": "tier"}},
	"lanes[].join.cookie":    {"name": "member", "valueSecretRef": map[string]any{"name": "members", "key": "cookie"}},
	"redis.secretRef":        {"name": "redis"},
	"upstream.service":       {"name": "orders", "port": 8080},
	"proxy.autoscaling":      {"maxReplicas": 4},
}

// drawSeedSources are values of a draw's seedSource: both of the enum, and some that are not.
func drawSeedSources() []any {
	return []any{"CommitReveal", "Beacon", "beacon", "Random", "", absent}
}

// chainHashes are values of a beacon's chainHash: 64 lower-case hex digits, and near misses.
func chainHashes() []any {
	return []any{strings.Repeat("ab", 32), strings.Repeat("ab", 31) + "a", strings.Repeat("AB", 32), strings.Repeat("ab", 32) + "0", strings.Repeat("g", 64), ""}
}

// event is an event from start to end that overrides nothing.
func event(name, start, end string) map[string]any {
	return map[string]any{"name": name, "start": start, "end": end}
}

func withPreQueue(e map[string]any, from string) map[string]any {
	e["preQueueFrom"] = from
	return e
}

// distinctEvents are n events an hour each, one after the other.
func distinctEvents(n int) []any {
	out := make([]any, n)
	start := time.Date(2027, 3, 1, 11, 0, 0, 0, time.UTC)
	for i := range out {
		out[i] = event(fmt.Sprintf("event-%d", i), start.Add(time.Duration(i)*time.Hour).Format(time.RFC3339), start.Add(time.Duration(i+1)*time.Hour).Format(time.RFC3339))
	}
	return out
}

// lane is a lane joined by a code.
func lane(name string, percent int64) map[string]any {
	return map[string]any{"name": name, "weightPercent": percent,
		"join": map[string]any{"code": map[string]any{"keySecretRef": map[string]any{"name": "codes", "key": "key"}}}}
}

// distinctLanes are n lanes of percent each, none of one name.
func distinctLanes(n int, percent int64) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = lane(fmt.Sprintf("lane-%d", i), percent)
	}
	return out
}

func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// distinctHosts are n hosts, none the same.
func distinctHosts(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d.example", i)
	}
	return out
}

// routeHosts are the values a route's host is tried with.
func routeHosts() []any {
	return []any{absent, "shop.example", "a", "1.2.3.4", "Shop.example", "shop.example:443", "shop.example.", "-a.example", "a..b", "",
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61),
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62)}
}

// distinctRoutes are n routes, none the same.
func distinctRoutes(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"path": fmt.Sprintf("/r%d", i)}
	}
	return out
}

func repeat(v any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// durations are the given ones and the spellings every duration field is tried with.
func durations(given ...string) []any {
	out := []any{}
	for _, d := range given {
		out = append(out, d)
	}
	return append(out, "", "1", "-1s", "1d", "1e3ms", "1.5s", "1h30m", "100 ms", "1µs", "1μs", "1us", "0.1s", "100MS",
		"99999999999999999999h", "9223372036854775807ns", "9223372036854775808ns", "2562047h47m16.854775807s", int64(100))
}

func times() []any {
	return []any{
		"2027-03-01T10:00:00Z", "2027-03-01T09:30:00Z", "2027-03-01T18:00:00Z", "2027-03-02T10:00:01Z",
		"2027-03-01T10:00:00.123Z", "2027-03-01T10:00:00.123456789Z", "2027-03-01T10:00:00.1234567891Z",
		"2027-03-01T19:00:00+09:00", "2027-03-01T09:59:59-00:01", "2027-03-01T10:00:00+23:59",
		"2027-03-01T10:00:00+25:00", "2027-03-01T10:00:00+24:00", "2027-03-01T10:00:00+01:60", "2027-03-01T10:00:00+0100",
		"2027-03-01t10:00:00z", "2027-03-01t10:00:00Z", "2027-03-01T10:00:00z", "2027-03-01 10:00:00Z", "2027-03-01T10:00:00",
		"2027-03-01", "2027-02-30T10:00:00Z", "2027-03-01T24:00:00Z", "2027-03-01T10:00:60Z", "2027-03-01T10:00:00,5Z",
		"2027-03-01T10:00:00x5Z", "0001-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00",
		"1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "9999-12-31T23:59:59-05:00",
		"+2027-03-01T10:00:00Z", "12027-03-01T10:00:00Z", "", "now", int64(1800000000),
	}
}

func routePaths() []any {
	return []any{"/", "/api/v1/orders", "/checkout", "/ünï", "api", "/api/", "//", "/a/../b", "/a;b", "/a%2Fb", "/a?b", "/a#b",
		"/a\nb", "/a\\b", "/" + strings.Repeat("a", 1023), "/" + strings.Repeat("a", 1024), ""}
}

func methodLists() []any {
	return []any{
		absent, []any{}, []any{"POST"}, []any{"GET", "POST"}, []any{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"},
		[]any{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "GET"}, []any{"POST", "POST"}, []any{"post"},
		[]any{"CONNECT"}, []any{"TRACE"}, []any{""}, []any{"P OST"},
	}
}

func cidrLists() []any {
	one := func(c ...string) []any {
		out := make([]any, len(c))
		for i, x := range c {
			out[i] = x
		}
		return out
	}
	return []any{
		absent, []any{}, one("10.0.0.0/8"), one("192.0.2.0/24", "2001:db8::/32"), one("fd00::/8"), one("203.0.113.7/32"),
		one("0.0.0.0/0"), one("::/0"), one("0.0.0.0/1", "128.0.0.0/1"), one("::/1", "8000::/1"), one("0.0.0.0/7"), one("2000::/3"),
		one("::ffff:0:0/96"), one("::ffff:10.0.0.0/104"), one("10.0.0.1/8"), one("10.0.0.0/33"), one("10.0.0.0"), one("010.0.0.0/8"),
		one("10.0.0.0/08"), one("fe80::1%eth0/64"), one("10.0.0.0/8", "10.0.0.0/8"), one(""), one(" 10.0.0.0/8"),
		one("1.2.3.4/32", "1.2.3.5/32", "1.2.3.6/32", "1.2.3.7/32", "1.2.3.8/32", "1.2.3.9/32", "1.2.3.10/32", "1.2.3.11/32",
			"1.2.3.12/32", "1.2.3.13/32", "1.2.3.14/32", "1.2.3.15/32", "1.2.3.16/32", "1.2.3.17/32", "1.2.3.18/32", "1.2.3.19/32",
			"1.2.3.20/32", "1.2.3.21/32", "1.2.3.22/32", "1.2.3.23/32", "1.2.3.24/32", "1.2.3.25/32", "1.2.3.26/32", "1.2.3.27/32",
			"1.2.3.28/32", "1.2.3.29/32", "1.2.3.30/32", "1.2.3.31/32", "1.2.3.32/32", "1.2.3.33/32", "1.2.3.34/32", "1.2.3.35/32",
			"1.2.3.36/32"),
	}
}

func secretNames() []any {
	return []any{"invites", "a", "a.b", "a-b", "Invites", "a_b", "-a", "a.", strings.Repeat("a", 253), strings.Repeat("a", 254), ""}
}

func secretKeys() []any {
	return []any{"key", "signing-key", "a.b", "A_b", ".", "..", "a/b", "a b", strings.Repeat("k", 253), strings.Repeat("k", 254), ""}
}

func headerNames() []any {
	return []any{"X-User-Id", "X-Monitor-Token", "a", "1-2", "Host", "host", "X-Herdgate-Pass", "herdgate-release",
		"X-Forwarded-For", "Proxy-Thing", "Cookie", "Content-Type", "Sec-Fetch-Site", "X User", "X_User", "-X", "Hóst",
		strings.Repeat("x", 128), strings.Repeat("x", 129), ""}
}

func urls() []any {
	return []any{"http://orders:8080", "https://verify.example/siteverify", "http://[::1]:8080", "http://h:65535", "HTTP://h",
		"http://user:pw@h", "https://user@verify.example/x", "http://@h", "http://h:0", "http://h:0080", "http://h:65536",
		"http://h:", "http://h/?x", "http://h?x=1", "http://h#f", "ftp://h", "http://", "http:///p", "//h/x", "http://exa mple",
		"http:opaque", "http://h:8080:9090", "http://[::1", "http://h/" + strings.Repeat("a", 2048), ""}
}

func resourceLists() []any {
	return []any{
		absent, map[string]any{}, map[string]any{"cpu": "100m", "memory": "64Mi"}, map[string]any{"cpu": int64(1)},
		map[string]any{"cpu": "-1"}, map[string]any{"cpu": "1e3"}, map[string]any{"cpu": "1E3"}, map[string]any{"memory": "1e999999999"},
		map[string]any{"memory": "1Gi"}, map[string]any{"memory": "1gi"}, map[string]any{"cpu": "0.0000000001"}, map[string]any{"cpu": ""},
		map[string]any{"hugepages-2Mi": "2Mi"}, map[string]any{"example.com/device": "1"}, map[string]any{"gpu": "1"},
		map[string]any{"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi", "hugepages-2Mi": "2Mi", "a.example/x": "1",
			"b.example/x": "1", "c.example/x": "1", "d.example/x": "1", "e.example/x": "1"},
	}
}

// generated is one generated spec and what it changed, for failure messages.
type generated struct {
	object  map[string]any
	changes []string
}

// sampleObject is the sample as the unstructured object the API server is sent.
func sampleObject(name string) map[string]any {
	wq := builder.Queue("default", name).Obj()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wq)
	Expect(err).NotTo(HaveOccurred())
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return obj
}

// setField sets the spec field at path (with "[]" the first element of its list, made when missing)
// to v, creating the parents it needs with their required fields.
func setField(spec map[string]any, path string, v any) {
	if _, ok := v.(absentValue); path == "upstream.url" && !ok {
		delete(spec["upstream"].(map[string]any), "service") // exactly one of them
	}
	parts := strings.Split(path, ".")
	cur := spec
	for i, part := range parts {
		last := i == len(parts)-1
		name, isElem := strings.CutSuffix(part, "[]")
		prefix := strings.Join(append(slices.Clone(parts[:i]), name), ".")
		if isElem {
			list, _ := cur[name].([]any)
			if len(list) == 0 {
				list = []any{map[string]any{"path": "/a"}}
				switch name {
				case "bypass":
					list = []any{map[string]any{"name": "lane"}}
				case "lanes":
					list = []any{lane("members", 20)}
				case "events":
					list = []any{event("sale", "2027-03-01T11:00:00Z", "2027-03-01T12:00:00Z")}
				}
			}
			elem := list[0].(map[string]any)
			cur[name] = list
			cur = elem
			continue
		}
		if last {
			if _, ok := v.(absentValue); ok {
				delete(cur, name)
			} else {
				cur[name] = v
			}
			return
		}
		next, ok := cur[name].(map[string]any)
		if !ok {
			next = map[string]any{}
			for k, pv := range jsonCopy(fieldParents[prefix]) { // a copy: cases change what they set
				next[k] = pv
			}
			cur[name] = next
		}
		cur = next
	}
}

// The proxy's verdict on a typed spec: the config it would build (Secret values stand in with 32
// bytes, JWT pass keys with a key set of the spec's algorithm, as the operator keeps them).
func proxyVerdict(wq *herdgatev1alpha1.WaitingQueue) error {
	_, err := admission.NewConfigWithSecrets(wq, []byte(strings.Repeat("k", 32)), func(key string) ([]byte, error) {
		if key == herdgatev1alpha1.SecretPassKeys {
			keys := &pass.KeySet{}
			if _, err := keys.Rotate(time.Now(), pass.Rotation{Algorithm: pass.Algorithm(wq.Spec.EffectivePassAlgorithm()), Every: time.Hour}); err != nil {
				return nil, err
			}
			return keys.Marshal()
		}
		return []byte(strings.Repeat("v", 32)), nil
	})
	return err
}

// decode is how the proxy's watch reads an object: encoding/json into the Go types.
func decode(obj map[string]any) (*herdgatev1alpha1.WaitingQueue, error) {
	raw, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := json.Unmarshal(raw, wq); err != nil {
		return nil, err
	}
	return wq, nil
}

// apiVerdict creates obj on the API server without storing it, and returns the object as it would be
// stored.
func apiVerdict(obj map[string]any) (map[string]any, error) {
	u := &unstructured.Unstructured{Object: jsonCopy(obj)}
	if err := k8sClient.Create(ctx, u, client.DryRunAll); err != nil {
		return nil, err
	}
	return u.Object, nil
}

// typedObject is wq as Go writes it, for the API server.
func typedObject(wq *herdgatev1alpha1.WaitingQueue) map[string]any {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wq)
	Expect(err).NotTo(HaveOccurred())
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return jsonCopy(obj) // through JSON, as a client sends it: Go's own spellings
}

// checkParity holds one generated spec to the property; it returns a description of what broke it.
func checkParity(g generated) []string {
	var broken []string
	what := strings.Join(g.changes, ", ")
	stored, apiErr := apiVerdict(g.object)
	if apiErr == nil {
		wq, err := decode(stored)
		if err == nil {
			err = proxyVerdict(wq)
		}
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s: the API server accepts it, the proxy refuses what it stores: %v", what, err))
		}
	}
	wq, decodeErr := decode(g.object)
	if decodeErr != nil {
		if apiErr == nil {
			broken = append(broken, fmt.Sprintf("%s: the API server accepts a spelling the proxy cannot decode: %v", what, decodeErr))
		}
		return broken
	}
	proxyErr := proxyVerdict(wq)
	if fe := (*settings.FieldError)(nil); errors.As(proxyErr, &fe) && strings.Contains(fe.Detail, "out of range") {
		// A quantity Go cannot even print (1e999999999): refused before anything prints it.
		if apiErr == nil {
			broken = append(broken, fmt.Sprintf("%s: the API server accepts what the proxy refuses: %v", what, proxyErr))
		}
		return broken
	}
	typedErr := apiErr
	typed := typedObject(wq)
	if !equalJSON(typed, g.object) {
		_, typedErr = apiVerdict(typed)
	}
	if (typedErr == nil) != (proxyErr == nil) {
		broken = append(broken, fmt.Sprintf("%s: the API server says %v, the proxy's check says %v", what, typedErr, proxyErr))
	}
	return broken
}

// jsonCopy is obj through JSON: numbers and all as a client sends them.
func jsonCopy(obj map[string]any) map[string]any {
	raw, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]any{}
	Expect(json.Unmarshal(raw, &out)).To(Succeed())
	return out
}

func equalJSON(a, b map[string]any) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return string(ra) == string(rb)
}

// spec is the spec map of obj.
func spec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }

func describe(path string, v any) string {
	if _, ok := v.(absentValue); ok {
		return path + " unset"
	}
	raw, _ := json.Marshal(v)
	if len(raw) > 80 {
		raw = append(raw[:77], "..."...)
	}
	return path + "=" + string(raw)
}

var _ = Describe("The parity property", func() {
	It("has a pool of values for every field of the spec", func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "bases", "herdgate.io_waitingqueues.yaml"))
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.Unmarshal(raw, crd)).To(Succeed())
		schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		var leaves []string
		var walk func(path string, s apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
			switch {
			case s.Type == "array" && s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0:
				for name, p := range s.Items.Schema.Properties {
					walk(path+"[]."+name, p)
				}
			case len(s.Properties) > 0:
				for name, p := range s.Properties {
					walk(strings.TrimPrefix(path+"."+name, "."), p)
				}
			default:
				leaves = append(leaves, path)
			}
		}
		walk("", schema)
		sort.Strings(leaves)
		var missing []string
		for _, leaf := range leaves {
			if _, ok := fieldPools[leaf]; !ok {
				missing = append(missing, leaf)
			}
		}
		Expect(missing).To(BeEmpty(), "spec fields without a pool of values in fieldPools")
		Expect(len(leaves)).To(BeNumerically(">", 60))
	})

	It("holds for every value of every field, and for specs that change several at once", func() {
		seed := uint64(GinkgoRandomSeed())
		rng := rand.New(rand.NewPCG(seed, 27))
		paths := make([]string, 0, len(fieldPools))
		for p := range fieldPools {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		n := 0
		next := func() string { n++; return "parity-" + strconv.Itoa(n) }
		var cases []generated
		for _, p := range paths {
			for _, v := range fieldPools[p] {
				obj := sampleObject(next())
				setField(spec(obj), p, v)
				cases = append(cases, generated{obj, []string{describe(p, v)}})
			}
		}
		single := len(cases)
		for range 400 {
			obj := sampleObject(next())
			var changes []string
			for range 2 + rng.IntN(4) {
				p := paths[rng.IntN(len(paths))]
				v := fieldPools[p][rng.IntN(len(fieldPools[p]))]
				setField(spec(obj), p, v)
				changes = append(changes, describe(p, v))
			}
			cases = append(cases, generated{obj, changes})
		}
		var broken []string
		for _, c := range cases {
			broken = append(broken, checkParity(c)...)
		}
		GinkgoWriter.Printf("parity: %d specs (%d of one field, %d of several, seed %d)\n", len(cases), single, len(cases)-single, seed)
		Expect(broken).To(BeEmpty(), "specs on which the API server and the proxy disagree:\n%s", strings.Join(broken, "\n"))
	})
})

var _ = Describe("The specs the hostile suites found accepted, then never served", func() {
	DescribeTable("are refused by the API server and by the proxy's check, both naming the field",
		func(path string, value any, wantField, wantMessage string) {
			obj := sampleObject(fmt.Sprintf("refused-%d", CurrentSpecReport().LeafNodeLocation.LineNumber))
			setField(spec(obj), path, value)
			_, apiErr := apiVerdict(obj)
			Expect(apiErr).To(HaveOccurred(), "the API server accepted %s", describe(path, value))
			Expect(apiErr.Error()).To(ContainSubstring(wantField))
			Expect(apiErr.Error()).To(ContainSubstring(wantMessage))
			wq, err := decode(obj)
			if err == nil { // a spelling Go can read: the proxy's check names the same field
				err = proxyVerdict(wq)
				Expect(err).To(HaveOccurred(), "the proxy's check accepted %s", describe(path, value))
				Expect(err.Error()).To(ContainSubstring(wantField))
			}
		},
		Entry("an opening with an offset of 25 hours", "schedule.opensAt", "2027-03-01T10:00:00+25:00", "spec.schedule.opensAt", "should match"),
		Entry("an opening written with a lower-case t and z", "schedule.opensAt", "2027-03-01t10:00:00z", "spec.schedule.opensAt", "should match"),
		Entry("an opening in the year 1", "schedule.opensAt", "0001-01-01T00:00:00Z", "spec.schedule.opensAt", "between the years 1970 and 9000"),
		Entry("a pre-queue opening in the year 0", "schedule.preQueueFrom", "0000-12-31T23:00:00Z", "spec.schedule.preQueueFrom", "between the years 1970 and 9000"),
		Entry("a challenge verifyURL with credentials", "entry.challenge.external.verifyURL", "https://user:password@verify.example/siteverify",
			"spec.entry.challenge.external.verifyURL", "must not hold credentials"),
		Entry("a challenge verifyURL with port 0", "entry.challenge.external.verifyURL", "https://verify.example:0/siteverify",
			"spec.entry.challenge.external.verifyURL", "port"),
		Entry("everyone as a trusted proxy", "entry.trustedProxies", []any{"10.0.0.0/8", "0.0.0.0/0"}, "spec.entry.trustedProxies[1]", "at most a /8"),
		Entry("every IPv6 client as a trusted proxy", "entry.trustedProxies", []any{"::/0"}, "spec.entry.trustedProxies[0]", "at most a /8"),
		Entry("half the internet as a trusted proxy", "entry.trustedProxies", []any{"0.0.0.0/1", "128.0.0.0/1"}, "spec.entry.trustedProxies[0]", "at most a /8"),
		Entry("a bypass lane for everyone", "bypass[].sourceCIDRs", []any{"0.0.0.0/0"}, "spec.bypass[0].sourceCIDRs[0]", "at most a /8"),
		Entry("a bypass lane for all global IPv6", "bypass[].sourceCIDRs", []any{"2000::/3"}, "spec.bypass[0].sourceCIDRs[0]", "at most a /8"),
		Entry("a bypass lane for IPv4-mapped IPv6, which matches nobody", "bypass[].sourceCIDRs", []any{"::ffff:10.0.0.0/104"},
			"spec.bypass[0].sourceCIDRs[0]", "must be a CIDR"),
		Entry("a route method that is none", "protectedRoutes[].methods", []any{"CONNECT"}, "spec.protectedRoutes[0].methods[0]", "Unsupported value"),
		Entry("a route method twice", "protectedRoutes[].methods", []any{"POST", "POST"}, "spec.protectedRoutes[0].methods[1]", "Duplicate value"),
		Entry("a proxy CPU of 1e-999999999, which takes minutes to read", "proxy.resources.requests", map[string]any{"cpu": "1e-999999999"},
			"spec.proxy.resources.requests.cpu", "should match"),
		Entry("a proxy memory of 33 characters", "proxy.resources.limits", map[string]any{"memory": strings.Repeat("1", 33)},
			"spec.proxy.resources.limits.memory", "may not be more than 32"),
	)
})
