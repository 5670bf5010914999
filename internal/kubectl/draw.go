package kubectl

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/draw"
)

func (c *cli) drawCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "draw", Short: "Check a room's pre-queue draw"}
	var recordPath string
	verify := &cobra.Command{
		Use:   "verify NAME --record FILE",
		Short: "Recompute every place of a room's draw from the seed in its status and check the record against it",
		Long: "draw verify reads status.seed and status.seedCommitment of the WaitingQueue, checks that the seed hashes to\n" +
			"the commitment published before the pre-queue opened, recomputes every place from the seed and compares\n" +
			"them with the record (lines \"arrival place\", as herd export-draw writes them; - reads stdin).",
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if recordPath == "" {
				return usageError{"draw verify", fmt.Errorf("flag --record is required")}
			}
			in := cmd.InOrStdin()
			if recordPath != "-" {
				f, err := os.Open(recordPath)
				if err != nil {
					return usageError{"draw verify", fmt.Errorf("flag --record: %w", err)}
				}
				defer f.Close()
				in = f
			}
			record, err := draw.ParseRecord(in)
			if err != nil {
				return fmt.Errorf("reading the record %s: %w", recordPath, err)
			}
			cl, ns, err := c.client()
			if err != nil {
				return err
			}
			wq := &herdgatev1alpha1.WaitingQueue{}
			if err := cl.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, wq); err != nil {
				return fmt.Errorf("reading waitingqueue %s/%s: %w", ns, args[0], err)
			}
			if wq.Status.Seed == "" {
				return fmt.Errorf("waitingqueue %s/%s has revealed no seed: its draw has not begun", ns, args[0])
			}
			seed, err := draw.ParseSeed(wq.Status.Seed)
			if err != nil {
				return fmt.Errorf("status.seed of waitingqueue %s/%s: %w", ns, args[0], err)
			}
			if err := draw.Verify(seed, wq.Status.SeedCommitment, record); err != nil {
				fmt.Fprintf(stdout, "FAILED: %v\n", err)
				return errShown
			}
			fmt.Fprintf(stdout, "ok: all %d places recomputed from the seed match the record; the seed hashes to the commitment %s\n",
				len(record), wq.Status.SeedCommitment)
			return nil
		},
	}
	verify.Flags().StringVar(&recordPath, "record", "", `the draw's record, lines "arrival place" (herd export-draw); "-" reads stdin`)
	cmd.AddCommand(verify)
	return cmd
}
