// Package dashboard tests herdgate's Grafana dashboard (charts/herdgate/files/dashboard.json): its
// shape, the chart's ConfigMap that carries it, and every query of every panel against a real
// Prometheus that scrapes the manager and two admission proxies while a herd goes through them.
package dashboard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

// Grafana's JSON as far as the tests read it.
type dashboardJSON struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Definition string `json:"definition"`
	Query      any    `json:"query"`
	Current    struct {
		Value string `json:"value"`
	} `json:"current"`
	Datasource *datasource `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	GridPos     struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

func dashboardPath(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "charts", "herdgate", "files", "dashboard.json")
}

func readDashboard(t *testing.T) (dashboardJSON, []byte) {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d, raw
}

// topics are what the dashboard shows, each by a series it must query.
var topics = map[string][]string{
	"depth and pre-queue":                {"herdgate_queue_depth", "herdgate_pre_queue_depth"},
	"admitted/s against the plan":        {"herdgate_admitted_total", "herdgate_admitted_at_once_total", "herdgate_planned_admission_rate", "herdgate_admission_rate"},
	"wait time":                          {"herdgate_wait_seconds_bucket"},
	"active against maxActive":           {"herdgate_active_visitors", "herdgate_max_active"},
	"workload latency":                   {"herdgate_workload_latency_seconds"},
	"workload in flight":                 {"herdgate_workload_in_flight"},
	"workload errors and no-shows":       {"herdgate_workload_error_ratio", "herdgate_workload_no_show_ratio"},
	"why the rate adapted":               {"herdgate_adaptive_reason"},
	"refusals by reason":                 {"herdgate_proxy_requests_total", "herdgate_proxy_pass_verifications_total"},
	"bypass per rule":                    {"herdgate_proxy_bypass_requests_total"},
	"poll budget and far positions":      {"herdgate_poll_budget_holds", "herdgate_proxy_far_signs_of_life_total", "herdgate_proxy_far_snapshots_total"},
	"Redis availability":                 {"herdgate_proxy_redis_up"},
	"proxies reporting, refusing config": {"herdgate_proxies_reporting", "herdgate_proxy_config_refused"},
	"lanes":                              {"herdgate_lane_depth", "herdgate_lane_admitted_total"},
	"shadow queue":                       {"herdgate_shadow_depth", "herdgate_shadowed_total"},
	"gateway checks":                     {"herdgate_gateway_checks_per_second"},
}

// TestTheDashboardIsWellFormed: the dashboard selects a room with its variables, every panel queries
// the chosen data source and fits the grid without overlapping another, and it shows every topic
// an on-call engineer looks for.
func TestTheDashboardIsWellFormed(t *testing.T) {
	d, _ := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Fatalf("the dashboard needs a uid and a title: %q %q", d.UID, d.Title)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || v.Query != "prometheus" {
		t.Errorf("no Prometheus data source variable: %+v", v)
	}
	for _, name := range []string{"namespace", "name"} {
		v, ok := vars[name]
		if !ok || v.Type != "query" || !strings.HasPrefix(v.Definition, "label_values(") {
			t.Errorf("the queue selector lacks the variable %s: %+v", name, v)
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s does not query the chosen data source", name)
		}
	}

	ids := map[int]bool{}
	used := map[[2]int]string{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q lies outside the 24-column grid: %+v", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[[2]int{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				used[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Description == "" {
			t.Errorf("panel %q says nothing of what it shows", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: a query without expr or with a refId twice: %+v", p.Title, tg)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not query the chosen data source", p.Title)
			}
			if !strings.Contains(tg.Expr, `namespace="$namespace", name="$name"`) && !strings.Contains(tg.Expr, `waitingqueue="$namespace/$name"`) {
				t.Errorf("panel %q queries more than the chosen room: %s", p.Title, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for topic, series := range topics {
		for _, s := range series {
			re := regexp.MustCompile(`\b` + s + `\{`)
			if !slices.ContainsFunc(exprs, re.MatchString) {
				t.Errorf("no panel shows %s (%s)", topic, s)
			}
		}
	}
}
