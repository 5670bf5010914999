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
	levels := flag.String("levels", "10,100,1000,3000", "room counts to reach, in order")
	baselineLevels := flag.String("baseline-levels", "10,100,1000", "room counts to reach with --baseline")
	idle := flag.Duration("idle", time.Minute, "how long each room count is watched idle")
	busy := flag.Duration("busy", 30*time.Second, "how long each room count is watched with a tenth of its rooms busy")
	settle := flag.Duration("settle", 15*time.Second, "how long new rooms settle after showing a plan, before the idle window")
	out := flag.String("out", "", "also write the report to this file")
	profiles := flag.String("profiles", "", "write CPU profiles of this build's manager over each idle and busy window to this directory")
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := measure(ctx, *managerBin, *proxyBin, *baselineBin, counts, baselineCounts, *idle, *busy, *settle, *out, *profiles)
	stop()
	os.Exit(code)
}

// measure runs the baseline's plan, then this build's, prints the report and writes it to out; it
// returns the exit code.
func measure(ctx context.Context, managerBin, proxyBin, baselineBin string, counts, baselineCounts []int, idle, busy, settle time.Duration, out, profiles string) int {

	base := plan{proxyBin: proxyBin, idle: idle, busy: busy, busyShare: 0.1, settle: settle, modeChanges: 4, log: os.Stderr}
	var plans []plan
	if baselineBin != "" {
		p := base
		p.label, p.managerBin, p.levels = "baseline", baselineBin, baselineCounts
		plans = append(plans, p)
	}
	p := base
	p.label, p.managerBin, p.levels, p.profiles = "this build", managerBin, counts, profiles
	plans = append(plans, p)

	var all []level
	for _, p := range plans {
		levels, err := p.measure(ctx)
		all = append(all, levels...)
		if err != nil {
			fmt.Print(report(all, idle, busy))
			fmt.Fprintln(os.Stderr, "bench-rooms:", err)
			return 1
		}
	}
	text := report(all, idle, busy)
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
	fmt.Fprintf(&b, "Idle (%s window): nobody waits in any room.\n\n", idle)
	b.WriteString("| manager | rooms | new rooms show a plan after | manager CPU | manager RSS | Redis CPU | Redis commands/s | API server CPU | etcd CPU | API writes/s | status writes | API reads/s | reconciles/s | manager CPU per /metrics scrape |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, l := range levels {
		w := l.idle
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %.0f MiB | %s | %.0f | %s | %s | %.2f | %d | %.1f | %.1f | %s |\n", l.label, l.rooms, l.toPlan.Round(time.Second),
			pct(w.manager), float64(w.managerRSS)/(1<<20), pct(w.redis), w.redisCommands, pct(w.apiserver), pct(w.etcd), w.apiWrites, w.statusWrites, w.apiReads,
			w.reconciles(), w.scrapeCPU.Round(time.Millisecond))
	}
	b.WriteString("\nWrites in the idle windows, by verb and resource:\n\n")
	for _, l := range levels {
		fmt.Fprintf(&b, "* %s, %d rooms: %s\n", l.label, l.rooms, l.idle.topWrites(4))
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
