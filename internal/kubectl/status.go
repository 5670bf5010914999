package kubectl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

func (c *cli) statusCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show a room's phase, plan, queue, rates, why its rate was adapted, and its conditions in words",
		Args:  oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := c.client()
			if err != nil {
				return err
			}
			wq := &herdgatev1alpha1.WaitingQueue{}
			if err := cl.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, wq); err != nil {
				return fmt.Errorf("reading waitingqueue %s/%s: %w", ns, args[0], err)
			}
			return writeStatus(stdout, wq)
		},
	}
}

// writeStatus writes wq's state the way a person reads it.
func writeStatus(out io.Writer, wq *herdgatev1alpha1.WaitingQueue) error {
	st := wq.Status
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(w, "%s:\t%s\n", k, fmt.Sprintf(format, v...)) }
	row("WaitingQueue", "%s/%s (generation %d, status of %d)", wq.Namespace, wq.Name, wq.Generation, st.ObservedGeneration)
	phase := "unknown"
	if c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionOpen); c != nil {
		phase = c.Reason
	}
	mode := wq.Spec.EffectiveMode()
	if wq.Spec.Suspend != nil && *wq.Spec.Suspend {
		row("Phase", "%s, mode %s, suspended", phase, mode)
	} else {
		row("Phase", "%s, mode %s", phase, mode)
	}
	row("Room ID", "%s (its cookies end in _%s; on a shared host, herdgate's links carry ?room=%s)",
		herdgatev1alpha1.RoomID(wq.Namespace, wq.Name), herdgatev1alpha1.RoomID(wq.Namespace, wq.Name), herdgatev1alpha1.RoomID(wq.Namespace, wq.Name))
	row("Enforcement", "%s", enforcement(wq))
	if p := st.Plan; p != nil {
		plan := fmt.Sprintf("%d per tick of %s, %s a second (%s)", p.BatchSize, wq.Spec.EffectiveTick(), p.AdmissionsPerSecond, p.Source)
		if p.TickLimit != nil {
			plan += fmt.Sprintf("; ticks admit at most %d, so %s a second", *p.TickLimit, p.EffectiveAdmissionsPerSecond)
		}
		row("Plan", "%s", plan)
	} else {
		row("Plan", "none yet")
	}
	queue := fmt.Sprintf("%d waiting", st.QueueDepth)
	if st.PreQueueDepth > 0 {
		queue += fmt.Sprintf(", %d in the pre-queue", st.PreQueueDepth)
	}
	active := fmt.Sprintf("%d", st.ActiveVisitors)
	if st.MaxActive != nil {
		active += fmt.Sprintf(" of at most %d", *st.MaxActive)
	}
	row("Queue", "%s; %s holding a pass%s", queue, active, figuresAge(st, time.Now()))
	row("Admitted", "%s a second over the last 10 s; %s released", orZero(st.AdmittedPerSecond), orZero(st.ReleasedPerSecond))
	if b := st.LastBusy; b != nil {
		row("Last busy", "%s", busySpell(b, time.Now()))
	}
	if len(st.Lanes) > 0 {
		row("Lanes", "%s", lanes(wq))
	}
	if wl := st.Workload; wl != nil && wl.Reason != "" {
		row("Adapted", "%s: admitting %s a second", wl.Reason, wl.AdmissionsPerSecond)
	}
	if wl := st.Workload; wl != nil && wl.WaitEstimatesJudged > 0 {
		row("Estimates", "waits told off by at most %s %% for 9 in 10 of the %d visitors admitted over the last 5 minutes", wl.WaitEstimateErrorP90Percent, wl.WaitEstimatesJudged)
	}
	if st.Proxy != nil {
		row("Proxy", "%d ready", st.Proxy.ReadyReplicas)
	}
	if st.SeedCommitment != "" {
		seed := "not revealed yet"
		if st.Seed != "" {
			seed = st.Seed
		}
		row("Draw", "commitment %s, seed %s", st.SeedCommitment, seed)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "Conditions:")
	for _, c := range st.Conditions {
		fmt.Fprintf(out, "  %s %s (%s): %s\n", c.Type, conditionWord(string(c.Status)), c.Reason, strings.TrimSpace(c.Message))
	}
	if len(st.Conditions) == 0 {
		fmt.Fprintln(out, "  none yet: the manager has not reconciled the room")
	}
	return nil
}

// figuresAge says since when the live figures are as shown, the way kubectl writes an age: the
// manager writes them when they change, not when they are read again unchanged.
func figuresAge(st herdgatev1alpha1.WaitingQueueStatus, now time.Time) string {
	if st.LiveFiguresTime == nil {
		return ""
	}
	return " (since " + duration.HumanDuration(now.Sub(st.LiveFiguresTime.Time)) + " ago)"
}

// lanes says, for each of the room's queues, its share of the batch, how many wait in it and how
// many it admits.
func lanes(wq *herdgatev1alpha1.WaitingQueue) string {
	shares := map[string]int32{}
	rest := int32(100)
	for _, l := range wq.Spec.Lanes {
		shares[l.Name] = l.WeightPercent
		rest -= l.WeightPercent
	}
	shares["main"] = rest
	var out []string
	for _, l := range wq.Status.Lanes {
		out = append(out, fmt.Sprintf("%s (%d %%) %d waiting, %s a second", l.Name, shares[l.Name], l.Depth, orZero(l.AdmittedPerSecond)))
	}
	return strings.Join(out, "; ")
}

// busySpell says what the room's last busy spell did, and when.
func busySpell(b *herdgatev1alpha1.BusySpellStatus, now time.Time) string {
	when := "ended " + duration.HumanDuration(now.Sub(b.End.Time)) + " ago"
	if b.Ongoing {
		when = "under way"
	}
	return fmt.Sprintf("%d admitted at %s a second over %s (%s), up to %d waiting",
		b.Admitted, b.AdmittedPerSecond, duration.HumanDuration(b.End.Sub(b.Start.Time)), when, b.PeakDepth)
}

// enforcement says who enforces the room and, for a gateway, whether it asks the check.
func enforcement(wq *herdgatev1alpha1.WaitingQueue) string {
	if wq.Spec.EffectiveEnforcement() != herdgatev1alpha1.EnforcementGateway {
		return "Proxy: the admission proxy forwards admitted visitors"
	}
	out := "Gateway: the gateways ask the check " + orZero(wq.Status.GatewayChecksPerSecond) + " times a second"
	if c := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionGatewayChecking); c != nil && c.Status != "True" {
		out += " (" + c.Reason + ")"
	}
	return out
}

func conditionWord(status string) string {
	switch status {
	case "True":
		return "yes"
	case "False":
		return "no"
	}
	return "unknown"
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
