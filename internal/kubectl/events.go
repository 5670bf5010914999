package kubectl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/settings"
)

func (c *cli) eventsCommand(stdout io.Writer) *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "events NAME",
		Short: "List a room's events and show the settings in force at a time",
		Long: "events lists the events of a room's calendar (spec.events) and what each overrides, then the settings\n" +
			"the room runs with at --at (now by default): the event in force, the plan, maxActive, the page's\n" +
			"notice and template, how long a pass lasts, and a launch's pre-queue. It derives them as the manager\n" +
			"and the proxies do, from the WaitingQueue as it is stored.",
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			when := time.Now()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageError{"events", fmt.Errorf("--at %q is not an RFC 3339 time such as 2027-03-01T10:00:00Z", at)}
				}
				when = t
			}
			cl, ns, err := c.client()
			if err != nil {
				return err
			}
			wq := &herdgatev1alpha1.WaitingQueue{}
			if err := cl.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, wq); err != nil {
				return fmt.Errorf("reading waitingqueue %s/%s: %w", ns, args[0], err)
			}
			return writeEvents(stdout, wq, when)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "the time to show the settings at, in RFC 3339 (default now)")
	return cmd
}

// writeEvents writes wq's calendar and the settings in force at t.
func writeEvents(out io.Writer, wq *herdgatev1alpha1.WaitingQueue, t time.Time) error {
	s, err := settings.Derive(wq)
	if err != nil {
		return fmt.Errorf("the spec of waitingqueue %s/%s cannot run: %w", wq.Namespace, wq.Name, err)
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(wq.Spec.Events) == 0 {
		fmt.Fprintf(w, "waitingqueue %s/%s has no events\n", wq.Namespace, wq.Name)
	} else {
		fmt.Fprintln(w, "EVENT\tPRE-QUEUE FROM\tSTART\tEND\tOVERRIDES")
		for _, ev := range wq.Spec.Events {
			from := "-"
			if ev.PreQueueFrom != nil {
				from = stamp(ev.PreQueueFrom.Time)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", ev.Name, from, stamp(ev.Start.Time), stamp(ev.End.Time), overrides(ev))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	cur := s.At(t)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(w, "  %s:\t%s\n", k, fmt.Sprintf(format, v...)) }
	in := "the room's own settings"
	if cur.Event != "" {
		in = "the event " + cur.Event
	}
	fmt.Fprintf(w, "\nAt %s: %s\n", stamp(t), in)
	row("Plan", "%s per second, %d per %s tick", cur.Effective.RateString(), cur.Effective.BatchSize(), cur.Effective.Tick())
	if cur.MaxActive > 0 {
		row("Max active", "%d", cur.MaxActive)
	} else {
		row("Max active", "no cap")
	}
	row("Pass", "lasts %s (maxSession %s)", cur.PassTTL, cur.MaxSession)
	if sc := cur.Schedule; sc != nil {
		row("Launch", "%s: pre-queue from %s, drawn at %s", cur.PhaseAt(t), stamp(sc.PreQueueFrom), stamp(sc.OpensAt))
	}
	notice, template := "none", "built-in"
	if pg := cur.Page; pg != nil {
		if pg.Message != "" {
			notice = fmt.Sprintf("%q", pg.Message)
		}
		if pg.Template != nil {
			template = fmt.Sprintf("ConfigMap %s key %s", pg.Template.Name, pg.Template.Key)
		}
	}
	row("Page", "%s; notice %s", template, notice)
	if next := s.NextEdge(t); !next.IsZero() {
		row("Next change", "%s (%s from then)", stamp(next), next.Sub(t).Round(time.Second))
	}
	return w.Flush()
}

// overrides names what an event overrides.
func overrides(ev herdgatev1alpha1.Event) string {
	var out []string
	if ev.Capacity != nil {
		out = append(out, "capacity")
	}
	if ev.MaxActive != nil {
		out = append(out, "maxActive")
	}
	if ev.Page != nil {
		out = append(out, "page")
	}
	if ev.Session != nil {
		out = append(out, "session")
	}
	if ev.PreQueueFrom != nil {
		out = append(out, "a pre-queue and its draw")
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}
