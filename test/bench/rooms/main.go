// Command bench-rooms measures what rooms cost one manager: it runs the manager binary against a
// control plane (envtest, no node) and a redis-server of its own, makes 10, 100, 1,000 and 3,000
// reference rooms, and at each count watches them idle, then with a tenth of them busy (filled with
// visitors, admitting at their plan). It reports the CPU of the manager, Redis, the API server and
// etcd, the manager's memory, Redis commands and API writes per second, status writes, the busy rooms'
// admitted/target and tick lag, and how long a mode change takes to reach a busy room's proxy. With
// --baseline it measures an earlier manager binary the same way first, for before/after figures from
// one run. Run it with `make bench-rooms`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/herdgate/herdgate/internal/scheduler"
)

func main() {
	managerBin := flag.String("manager", "", "manager binary to measure (required)")
	proxyBin := flag.String("proxy", "", "herdgate-proxy binary, run for one busy room to time mode changes (required)")
	baselineBin := flag.String("baseline", "", "an earlier manager binary to measure the same way first, at --baseline-levels")
	levels := flag.String("levels", "100,1000,10000", "room counts to reach, in order; each level makes its new rooms at once")
	baselineLevels := flag.String("baseline-levels", "10,100,1000", "room counts to reach with --baseline")
	idle := flag.Duration("idle", time.Minute, "how long each room count is watched idle")
	busy := flag.Duration("busy", 30*time.Second, "how long each room count is watched with a tenth of its rooms busy")
	busyMax := flag.Int("busy-max", 100, "the most rooms made busy at a level: each admits 140 a second, and 100 of them take about a third of a core of Redis")
	settle := flag.Duration("settle", 15*time.Second, "how long new rooms settle after showing a plan, before the idle window")
	out := flag.String("out", "", "also write the report to this file")
	profiles := flag.String("profiles", "", "write CPU profiles of this build's manager over each idle and busy window to this directory")
	managerArgs := flag.String("manager-args", "", "more flags for this build's manager, separated by spaces (--max-concurrent-reconciles=16)")
	flag.Parse()
	// The control plane's own messages are not the bench's: it reports its progress itself.
	ctrllog.SetLogger(logr.Discard())
	if *managerBin == "" || *proxyBin == "" {
		fmt.Fprintln(os.Stderr, "flags --manager and --proxy are required")
		os.Exit(2)
	}
	counts, err := parseLevels("levels", *levels)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	baselineCounts, err := parseLevels("baseline-levels", *baselineLevels)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *idle <= 0 || *busy <= 0 || *settle < 0 {
		fmt.Fprintln(os.Stderr, "flags --idle and --busy must be positive and --settle must not be negative")
		os.Exit(2)
	}
	if *busyMax < 1 {
		fmt.Fprintf(os.Stderr, "flag --busy-max: %d is not a positive number of rooms\n", *busyMax)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	base := plan{proxyBin: *proxyBin, idle: *idle, busy: *busy, busyShare: 0.1, busyMax: *busyMax, settle: *settle, modeChanges: 4, log: os.Stderr}
	code := measure(ctx, base, *managerBin, *baselineBin, strings.Fields(*managerArgs), counts, baselineCounts, *out, *profiles)
	stop()
	os.Exit(code)
}

// measure runs the baseline's plan, then this build's, prints the report and writes it to out; it
// returns the exit code.
func measure(ctx context.Context, base plan, managerBin, baselineBin string, managerArgs []string, counts, baselineCounts []int, out, profiles string) int {
	var plans []plan
	if baselineBin != "" {
		p := base
		p.label, p.managerBin, p.levels = "baseline", baselineBin, baselineCounts
		plans = append(plans, p)
	}
	p := base
	p.label, p.managerBin, p.managerArgs, p.levels, p.profiles = "this build", managerBin, managerArgs, counts, profiles
	if len(managerArgs) > 0 {
		p.label += " (" + strings.Join(managerArgs, " ") + ")"
	}
	plans = append(plans, p)

	var all []level
	for _, p := range plans {
		levels, err := p.measure(ctx)
		all = append(all, levels...)
		if err != nil {
			fmt.Print(report(all, base.idle, base.busy))
			fmt.Fprintln(os.Stderr, "bench-rooms:", err)
			return 1
		}
	}
	text := report(all, base.idle, base.busy)
	fmt.Print(text)
	if out != "" {
		if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench-rooms:", err)
			return 1
		}
	}
	return 0
}

func parseLevels(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("flag --%s: %q is not a rising list of room counts such as 10,100,1000", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func report(levels []level, idle, busy time.Duration) string {
	var b strings.Builder
	pct := func(share float64) string { return fmt.Sprintf("%.1f %%", 100*share) }
	b.WriteString("Rooms made at once: from the first create until every room shows its plan (status.plan at its generation), and until every room\n")
	b.WriteString("admits (the Admitting condition True at its generation, after the scheduler's first tick); CPU and requests are counted until every room admits.\n\n")
	b.WriteString("| manager | rooms | made at once | every room shows its plan | every room admits | manager CPU | Redis CPU | API server CPU | etcd CPU | manager RSS after | requests per room made |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, l := range levels {
		w := l.create
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %.0f MiB | %.1f |\n", l.label, l.rooms, l.added, l.toPlan.Round(time.Second), l.toAdmit.Round(time.Second),
			pct(w.manager), pct(w.redis), pct(w.apiserver), pct(w.etcd), float64(w.managerRSS)/(1<<20), w.requestsPerRoom(l.added))
	}
	b.WriteString("\nThe requests the API server answered while the rooms were made, less the bench's own, per room made (the manager's, and a few of the API server's\n")
	b.WriteString("own loops: a Service's cluster IP is an ipaddresses POST, its lease and the kubernetes Service's endpoints are renewed every 10 s):\n\n")
	for _, l := range levels {
		fmt.Fprintf(&b, "* %s, %d rooms: %s\n", l.label, l.rooms, l.create.perRoom(l.added, 10))
	}
	fmt.Fprintf(&b, "\nIdle (%s window): nobody waits in any room.\n\n", idle)
	b.WriteString("| manager | rooms | manager CPU | manager RSS | Redis CPU | Redis commands/s | API server CPU | etcd CPU | API writes/s | status writes | API reads/s | reconciles/s | manager CPU per /metrics scrape |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, l := range levels {
		w := l.idle
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f MiB | %s | %.0f | %s | %s | %.2f | %d | %.2f | %.2f | %s |\n", l.label, l.rooms,
			pct(w.manager), float64(w.managerRSS)/(1<<20), pct(w.redis), w.redisCommands, pct(w.apiserver), pct(w.etcd), w.apiWrites, w.statusWrites, w.apiReads,
			w.reconciles(), w.scrapeCPU.Round(time.Millisecond))
	}
	b.WriteString("\nRequests per second in the idle windows, by verb and resource, as above:\n\n")
	for _, l := range levels {
		fmt.Fprintf(&b, "* %s, %d rooms: %s\n", l.label, l.rooms, l.idle.topRequests(10, false))
	}
	fmt.Fprintf(&b, "\nBusy (%s window): a tenth of the rooms admit at their plan (140 a second each) from a line filled before.\n\n", busy)
	b.WriteString("| manager | rooms | busy | manager CPU | Redis CPU | Redis commands/s | API server CPU | API writes/s | API reads/s | reconciles/s | admitted/target | busy tick lag p99 | mode change reaches the proxy (max of 4) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, l := range levels {
		w := l.busy
		lag, bound, _ := w.lagP99(l.busyRooms)
		ratio := w.admitted(l.busyRooms) / l.target
		dry := ""
		if l.ranDry > 0 {
			dry = fmt.Sprintf(" (%d ran dry)", l.ranDry)
		}
		change := "-"
		if len(l.modeChanges) > 0 {
			change = slices.Max(l.modeChanges).Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %.0f | %s | %.2f | %.1f | %.1f | %.4f%s | %s (bucket ≤ %s) | %s |\n", l.label, l.rooms, len(l.busyRooms),
			pct(w.manager), pct(w.redis), w.redisCommands, pct(w.apiserver), w.apiWrites, w.apiReads, w.reconciles(), ratio, dry,
			lag.Round(10*time.Microsecond), bound.Round(10*time.Microsecond), change)
	}
	b.WriteString("\nBusy ticks later than 6.4 ms, by where the room's grid falls in the scheduler's 100 ms wake slot (sleeping rooms wake at its start):\n\n")
	for _, l := range levels {
		near, far := l.busyRoomsByPhase(wakeBurst)
		nl, nt := l.busy.lateTicks(near, 6400*time.Microsecond)
		fl, ft := l.busy.lateTicks(far, 6400*time.Microsecond)
		fmt.Fprintf(&b, "* %s, %d rooms: %d of %d ticks of the %d rooms in its first %s, %d of %d ticks of the other %d\n",
			l.label, l.rooms, nl, nt, len(near), wakeBurst, fl, ft, len(far))
	}
	return b.String()
}

// wakeBurst is how far into a wake slot the report counts a busy room's grid as meeting the rooms
// that wake at the slot's start.
const wakeBurst = 10 * time.Millisecond

// busyRoomsByPhase splits the busy rooms by their grid phase: those whose 100 ms grid falls within
// the first d of each 100 ms wake slot, and the others.
func (l level) busyRoomsByPhase(d time.Duration) (near, far []string) {
	for _, r := range l.busyRooms {
		if scheduler.GridPhase(types.NamespacedName{Namespace: namespace, Name: r}, 100*time.Millisecond) < d {
			near = append(near, r)
		} else {
			far = append(far, r)
		}
	}
	return near, far
}
