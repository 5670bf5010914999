package kubectl

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// modeChange is what a mode command sets.
type modeChange struct {
	name, short string
	mode        herdgatev1alpha1.Mode
	// resume also clears spec.suspend: the room admits again.
	resume bool
}

var modeCommands = []modeChange{
	{name: "open", mode: herdgatev1alpha1.ModeQueue, resume: true,
		short: "Open the room: mode Queue and not suspended, so visitors queue and are admitted at the plan's rate"},
	{name: "queue", mode: herdgatev1alpha1.ModeQueue,
		short: "Set mode Queue: visitors queue, and only pass holders reach the protected routes (spec.suspend stays as it is)"},
	{name: "close", mode: herdgatev1alpha1.ModeClosed,
		short: "Set mode Closed: protected routes closed to everyone; waiting visitors keep their places, nobody is admitted"},
	{name: "passthrough", mode: herdgatev1alpha1.ModePassthrough,
		short: "Set mode Passthrough: protected routes need no pass, as if the room were not there; places are kept"},
}

func (c *cli) modeCommand(stdout io.Writer, m modeChange) *cobra.Command {
	return &cobra.Command{
		Use:   m.name + " NAME",
		Short: m.short,
		Args:  oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := c.client()
			if err != nil {
				return err
			}
			spec := map[string]any{"mode": m.mode}
			if m.resume {
				spec["suspend"] = false
			}
			patch, err := json.Marshal(map[string]any{"spec": spec})
			if err != nil {
				return err
			}
			wq := &herdgatev1alpha1.WaitingQueue{}
			wq.Namespace, wq.Name = ns, args[0]
			if err := cl.Patch(cmd.Context(), wq, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return fmt.Errorf("setting the mode of waitingqueue %s/%s: %w", ns, args[0], err)
			}
			fmt.Fprintf(stdout, "waitingqueue %s/%s: mode %s%s (generation %d)\n", ns, wq.Name, wq.Spec.Mode, suspendedNote(wq), wq.Generation)
			return nil
		},
	}
}

func suspendedNote(wq *herdgatev1alpha1.WaitingQueue) string {
	if wq.Spec.Suspend != nil && *wq.Spec.Suspend {
		return ", suspended: nobody is admitted until 'kubectl herdgate open'"
	}
	return ""
}
