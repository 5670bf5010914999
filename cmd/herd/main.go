// Command herd is herdgate's load tool. Its subcommands:
//
//	herd backend     run the stand-in orders service (40 connections, 200 ms per order, 30 s pool wait)
//	herd run         let a herd of virtual visitors through a waiting room and print what they measured
//	herd experiment  run the reference experiment in this process and write a report with charts
//	herd launch      run a launch (scheduled opening, pre-queue draw, sessions) and write its report
//	herd lanes       run a herd into two metered lanes with an event in the middle, and write its report
//	herd adaptive    run the workload's bad days, Declared against Adaptive, and write their report
//	herd export-draw     write a queue's pre-queue draw record from Redis
//	herd verify-shuffle  recompute a draw from its seed and check its record and commitment
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/herd"
)

func main() {
	// The scheduler and the proxy log through controller-runtime; the load tool reports on its own.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: herd <command> [flags]

commands:
  backend     run the stand-in orders service
  run         send a herd of virtual visitors through a waiting room
  experiment  run the reference experiment and write docs/herd
  launch      run a launch in this process and write docs/herd/launch.md
  lanes       run a herd into two metered lanes and an event in this process, and write docs/herd/lanes.md
  adaptive    run the workload's bad days, Declared against Adaptive capacity, and write docs/herd/adaptive.md
  estimates   run eight crowds into a live room, judge every wait told, and write docs/herd/estimates.md
  export-draw     write a queue's pre-queue draw record from Redis
  verify-shuffle  recompute a draw from its seed and check the record and the commitment
  gateway-config  print what a gateway needs to enforce a WaitingQueue (spec.enforcement Gateway)
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "backend":
		return backendCmd(ctx, args[1:], stderr)
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "experiment":
		return experimentCmd(ctx, args[1:], stdout, stderr)
	case "launch":
		return launchCmd(ctx, args[1:], stdout, stderr)
	case "lanes":
		return lanesCmd(ctx, args[1:], stdout, stderr)
	case "estimates":
		return estimatesCmd(ctx, args[1:], stdout, stderr)
	case "adaptive":
		return adaptiveCmd(ctx, args[1:], stdout, stderr)
	case "export-draw":
		return exportDrawCmd(ctx, args[1:], stdout, stderr)
	case "verify-shuffle":
		return verifyShuffleCmd(args[1:], stdout, stderr)
	case "gateway-config":
		return gatewayConfigCmd(args[1:], os.Stdin, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "herd: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	return true, 0
}

func backendCmd(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd backend", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve orders on")
	pool := fs.Int("pool", herd.PoolSize, "connections in the pool")
	latency := fs.Duration("latency", herd.RequestLatency, "how long one order holds a connection")
	timeout := fs.Duration("timeout", herd.PoolTimeout, "how long an order waits for a connection before it fails")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if *pool < 1 || *latency <= 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "flags --pool, --latency and --timeout must be positive")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "flag --listen: %v\n", err)
		return 2
	}
	srv := &http.Server{Handler: herd.NewBackend(*pool, *latency, *timeout), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(stderr, "herd backend: %d connections, %s per order, serving on %s\n", *pool, *latency, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd run", flag.ContinueOnError)
	target := fs.String("target", "", "base URL of the admission proxy (required)")
	backendURL := fs.String("backend", "", "base URL of a herd backend, to report its measurements and reset them first")
	visitors := fs.Int("visitors", 500, "virtual visitors, all starting at once")
	name := fs.String("name", "Test A", "name of the run in the report")
	order := fs.String("order-path", "/api/v1/orders", "protected route the orders go to")
	giveUp := fs.Duration("give-up", 5*time.Minute, "how long a visitor waits before it gives up")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if *target == "" || *visitors < 1 {
		fmt.Fprintln(stderr, "flag --target is required and --visitors must be positive")
		return 2
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if *backendURL != "" {
		res, err := client.Post(*backendURL+"/reset", "", nil)
		if err != nil {
			fmt.Fprintf(stderr, "flag --backend: %v\n", err)
			return 2
		}
		res.Body.Close()
	}
	results := herd.Run(ctx, herd.Scenario{Name: *name, Visitors: *visitors, Target: strings.TrimSuffix(*target, "/"), OrderPath: *order, GiveUp: *giveUp})
	result := herd.RunResult{RunSpec: herd.RunSpec{Test: *name, Visitors: *visitors}, Visitors: results}
	if *backendURL != "" {
		res, err := client.Get(*backendURL + "/stats")
		if err != nil {
			fmt.Fprintf(stderr, "reading the backend's measurements: %v\n", err)
			return 1
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(&result.Backend); err != nil {
			fmt.Fprintf(stderr, "reading the backend's measurements: %v\n", err)
			return 1
		}
	}
	herd.Summary(stdout, result)
	if results.Failed > 0 {
		fmt.Fprintf(stdout, "\n%d visitors got no order through: %s\n", results.Failed, strings.Join(results.Errors, "; "))
	}
	return 0
}

func experimentCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd experiment", flag.ContinueOnError)
	out := fs.String("out", "docs/herd", "folder for results.md and the charts")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "flag --out: %v\n", err)
		return 2
	}
	runs, err := herd.Experiment(ctx, herd.Matrix(), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "herd experiment:", err)
		return 1
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "# The thundering-herd experiment\n\nMeasured by `make herd` on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02"), herd.Machine())
	fmt.Fprintf(&report, "Service: %d connections, %s per order, orders beyond the pool wait up to %s. Queue: tick %s; "+
		"batch 14 is derived (40 ÷ 200 ms × 70 %% × 100 ms), 500 and 1000 are overrides. Visitors all start at once, "+
		"enter, poll as told and place one order with their pass. Test A: 500 visitors; Test B: 140.\n\n",
		herd.PoolSize, herd.RequestLatency, herd.PoolTimeout, herd.Tick)
	herd.Table(&report, runs)
	for _, batch := range []int{14, 500} {
		var pair []herd.RunResult
		for _, r := range runs {
			if r.Test == "A" && r.Batch == batch {
				pair = append(pair, r)
			}
		}
		name := fmt.Sprintf("inflight-batch%d.svg", batch)
		if err := herd.InFlightChart(filepath.Join(*out, name), fmt.Sprintf("Test A, batch %d: orders in the service", batch), pair); err != nil {
			fmt.Fprintln(stderr, "herd experiment: chart:", err)
			return 1
		}
		fmt.Fprintf(&report, "\n![Test A, batch %d: orders in the service over time, jitter against none](%s)\n", batch, name)
	}
	herd.Findings(&report, runs)
	if err := os.WriteFile(filepath.Join(*out, "results.md"), report.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "herd experiment:", err)
		return 1
	}
	_, _ = stdout.Write(report.Bytes())
	return 0
}

func launchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd launch", flag.ContinueOnError)
	out := fs.String("out", "docs/herd", "folder for launch.md")
	spec := herd.LaunchSpec{}
	fs.IntVar(&spec.PreQueued, "visitors", 2000, "visitors arriving during the pre-queue")
	fs.IntVar(&spec.Late, "late", 200, "visitors arriving one after another once the room is open")
	fs.IntVar(&spec.Trickle, "trickle", 50, "visitors arriving at 10/s once the crowd is through")
	fs.DurationVar(&spec.PreQueue, "pre-queue", 20*time.Second, "how long the pre-queue is open before the opening")
	maxActive := fs.Int("max-active", 50, "the cap on active visitors; 0 for none")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	switch {
	case spec.PreQueued < 2 || spec.Late < 0 || spec.Trickle < 0:
		fmt.Fprintln(stderr, "herd launch: flag --visitors must be at least 2, --late and --trickle not negative")
		return 2
	case spec.PreQueue < 2*time.Second || spec.PreQueue > time.Hour:
		fmt.Fprintln(stderr, "herd launch: flag --pre-queue must be between 2s and 1h")
		return 2
	case *maxActive < 0 || *maxActive > 1_000_000:
		fmt.Fprintln(stderr, "herd launch: flag --max-active must be between 0 and 1000000")
		return 2
	}
	spec.MaxActive = int32(*maxActive)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "flag --out: %v\n", err)
		return 2
	}
	res, err := herd.Launch(ctx, spec, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "herd launch:", err)
		return 1
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "# A launch\n\nMeasured by `make herd-launch` on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02"), herd.Machine())
	fmt.Fprintf(&report, "The reference queue (40 connections, 200 ms per order, 70 %%: 14 per 100 ms tick) with a schedule: the "+
		"pre-queue opens, visitors arrive in the order of their numbers, the room opens and the scheduler draws the "+
		"pre-queue, later visitors queue behind it, and the orders service answers every order with "+
		"`Herdgate-Release: true`. Everything runs in one process on loopback: Redis, the scheduler, herdgate-proxy's "+
		"front and the visitors.\n\n")
	herd.LaunchReport(&report, res)
	if err := os.WriteFile(filepath.Join(*out, "launch.md"), report.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "herd launch:", err)
		return 1
	}
	_, _ = stdout.Write(report.Bytes())
	if res.VerifyErr != nil || res.OrdersBeforeOpening > 0 {
		return 1
	}
	return 0
}

func lanesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd lanes", flag.ContinueOnError)
	out := fs.String("out", "docs/herd", "folder for lanes.md")
	spec := herd.LanesSpec{MembersPercent: 20, PresalePercent: 30, EventUtilization: 100}
	fs.IntVar(&spec.Main, "main", 1500, "visitors of the main queue")
	fs.IntVar(&spec.Members, "members", 600, "visitors of the members lane (20 %)")
	fs.IntVar(&spec.Presale, "presale", 900, "visitors of the presale lane (30 %)")
	fs.DurationVar(&spec.Before, "before", 6*time.Second, "how long the room runs its own plan before the event")
	fs.DurationVar(&spec.Event, "event", 6*time.Second, "how long the event runs (whole seconds)")
	fs.DurationVar(&spec.After, "after", 6*time.Second, "how long the room runs its own plan after the event")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	switch {
	case spec.Main < 1 || spec.Members < 1 || spec.Presale < 1:
		fmt.Fprintln(stderr, "herd lanes: flags --main, --members and --presale must be at least 1")
		return 2
	case spec.Before < time.Second || spec.Event < time.Second || spec.After < time.Second || spec.Event%time.Second != 0 || spec.Before%time.Second != 0:
		fmt.Fprintln(stderr, "herd lanes: flags --before, --event and --after must be whole seconds, at least 1s")
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "flag --out: %v\n", err)
		return 2
	}
	res, err := herd.Lanes(ctx, spec, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "herd lanes:", err)
		return 1
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "# Metered lanes and an event\n\nMeasured by `make herd-lanes` on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02"), herd.Machine())
	fmt.Fprintf(&report, "The reference queue (40 connections, 200 ms per order) with two metered lanes (`spec.lanes`) and an event "+
		"(`spec.events`) that raises its utilization for a while. The visitors enter while the room is suspended, so that "+
		"every lane stays busy through the three windows; the counts are the scheduler's own, tick by tick. Everything runs "+
		"in one process on loopback: Redis, the scheduler, herdgate-proxy's front and the visitors.\n\n")
	herd.LanesReport(&report, res)
	if err := os.WriteFile(filepath.Join(*out, "lanes.md"), report.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "herd lanes:", err)
		return 1
	}
	_, _ = stdout.Write(report.Bytes())
	if res.Failed > 0 || res.ShareError() > 0.02 {
		return 1
	}
	return 0
}

func adaptiveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd adaptive", flag.ContinueOnError)
	out := fs.String("out", "docs/herd", "folder for adaptive.md and its charts")
	only := fs.String("workload", "", "run only this workload (slow-down, slow-down-gradual, no-shows, error-burst)")
	visitors := fs.Int("visitors", herd.AdaptiveVisitors, "visitors coming at the start of each run")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	var workloads []herd.Workload
	for _, w := range herd.Workloads() {
		if *only == "" || w.Name == *only {
			workloads = append(workloads, w)
		}
	}
	switch {
	case len(workloads) == 0:
		fmt.Fprintf(stderr, "herd adaptive: flag --workload: %q is none of slow-down, slow-down-gradual, no-shows, error-burst\n", *only)
		return 2
	case *visitors < 100 || *visitors > 100_000:
		fmt.Fprintln(stderr, "herd adaptive: flag --visitors must be between 100 and 100000")
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "flag --out: %v\n", err)
		return 2
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "# Admission that follows the workload\n\nMeasured by `make herd-adaptive` on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02"), herd.Machine())
	fmt.Fprintf(&report, "The reference queue (%d connections, %s per order, 70 %%: %.0f a second, target %d in flight) in front of "+
		"the stand-in orders service, %d visitors in line from the start, two proxy replicas (each visitor polls one and "+
		"orders through the other), the scheduler and Redis in this process, on loopback. Each workload runs with "+
		"`spec.capacity.mode: Declared` and with `Adaptive`; the grey band is the bad stretch. The columns: the most "+
		"orders in the service at once (holding a connection or waiting for one), the pool wait p95 over the run and "+
		"over the bad stretch and 5 s after it, the orders that reached the service per second from 5 s on and the mean "+
		"in the service then, the rate the ticks ran at, how many ticks after the first 503 the rate was halved, and how "+
		"long after the bad stretch the rate was back at the plan.\n\n",
		herd.PoolSize, herd.RequestLatency, herd.DeclaredRate, herd.PoolSize*7/10, *visitors)
	for _, w := range workloads {
		var runs []herd.WorkloadRun
		for _, mode := range []herdgatev1alpha1.CapacityMode{herdgatev1alpha1.CapacityDeclared, herdgatev1alpha1.CapacityAdaptive} {
			r, err := herd.RunWorkload(ctx, w, mode, *visitors, stderr)
			if err != nil {
				fmt.Fprintln(stderr, "herd adaptive:", err)
				return 1
			}
			f := herd.Analyse(w, r)
			fmt.Fprintf(stderr, "[herd]   peak in service %d, pool wait p95 %s, %.1f orders/s, rate %.0f … %.0f, brake %d ticks, back after %s\n",
				f.PeakInFlight, f.PoolWaitP95, f.Served, f.MinRate, f.MaxRate, f.BrakeTicks, f.Recovery)
			runs = append(runs, r)
		}
		inFlight, rate := "adaptive-"+w.Name+"-in-service.svg", "adaptive-"+w.Name+"-admissions.svg"
		if err := herd.WorkloadCharts(filepath.Join(*out, inFlight), filepath.Join(*out, rate), w, runs); err != nil {
			fmt.Fprintln(stderr, "herd adaptive: chart:", err)
			return 1
		}
		fmt.Fprintf(&report, "## %s\n\n", w.Title)
		herd.WorkloadTable(&report, w, runs)
		fmt.Fprintf(&report, "\n%s\n", w.Reading)
		fmt.Fprintf(&report, "\n![%s: orders in the service, Declared against Adaptive](%s)\n\n![%s: admissions per second](%s)\n\n", w.Title, inFlight, w.Title, rate)
	}
	name := "adaptive.md"
	if *only != "" {
		name = "adaptive-" + *only + ".md"
	}
	if err := os.WriteFile(filepath.Join(*out, name), report.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "herd adaptive:", err)
		return 1
	}
	_, _ = stdout.Write(report.Bytes())
	return 0
}

func estimatesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd estimates", flag.ContinueOnError)
	out := fs.String("out", "docs/herd", "folder for estimates.md and estimates.svg")
	only := fs.String("scenario", "", "run only the scenarios whose name holds this text (all by default)")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	var scenarios []herd.EstimateScenario
	for _, sc := range herd.EstimateScenarios() {
		if strings.Contains(sc.Name, *only) {
			scenarios = append(scenarios, sc)
		}
	}
	if len(scenarios) == 0 {
		fmt.Fprintf(stderr, "flag --scenario: no scenario's name holds %q\n", *only)
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "flag --out: %v\n", err)
		return 2
	}
	runs, err := herd.Estimates(ctx, scenarios, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "herd estimates:", err)
		return 1
	}
	if err := herd.EstimatesChart(filepath.Join(*out, "estimates.svg"), runs); err != nil {
		fmt.Fprintln(stderr, "herd estimates:", err)
		return 1
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "# Wait estimates\n\nMeasured by `make herd-estimates` on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02"), herd.Machine())
	fmt.Fprintf(&report, "Eight crowds into a live room: Redis, the scheduler and herdgate-proxy's front in one process on loopback, "+
		"the room admitting 14 a second (4 connections of 200 ms at 70 %%), with `abandonAfter: 10s` where visitors go silent. "+
		"In the last two the room also caps its active passes (`maxActive` 20 or 50), and each admitted visitor holds its pass for a "+
		"session of 4 to 12 s and ends it with a request the workload answers with `Herdgate-Release`: the cap, not the plan, "+
		"sets the pace. "+
		"Every visitor polls as told (until it goes silent) and notes each wait it is told; once admitted, each wait told is "+
		"compared with the wait it then had, until its pass, for waits of 5 s or more. Beside the waits herdgate told, the "+
		"same answers read as position ÷ rate would have (⌈position ÷ the plan's rate in force, or the lane's share of it⌉), "+
		"the estimate before the front's advance. \"Rises\" is the share of visitors whose estimated end moved later by more "+
		"than max(20 %%, 30 s). The goal: within 5 %% at p50 and 15 %% at p90, at entry and later, at most 5 %% rises, and no "+
		"poll made as told refused.\n\n")
	herd.EstimatesReport(&report, runs)
	fmt.Fprintf(&report, "\n![Waits told at entry against the waits had](estimates.svg)\n")
	if err := os.WriteFile(filepath.Join(*out, "estimates.md"), report.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "herd estimates:", err)
		return 1
	}
	_, _ = stdout.Write(report.Bytes())
	return 0
}
