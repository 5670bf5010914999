package kubectl

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/internal/draw"
)

func (c *cli) drawCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "draw", Short: "Check a room's pre-queue draw"}
	var recordPath, publicKey string
	verify := &cobra.Command{
		Use:   "verify NAME [--record FILE]",
		Short: "Check a room's draw: its seed against the commitment, the beacon's round, and every place of the record",
		Long: "draw verify reads status.seed, status.seedCommitment and status.draw of the WaitingQueue. It checks that the\n" +
			"seed hashes to the commitment published before the pre-queue opened. For a draw that took a beacon's round\n" +
			"(spec.draw.seedSource Beacon) it checks, offline, that the chain in status hashes to the spec's chainHash\n" +
			"(and has the public key of --public-key, when given), that the round is the first after the opening, and\n" +
			"that its BLS signature verifies with the chain's public key; it says which seed the draw used, and why a\n" +
			"draw fell back to the committed seed alone. With --record it recomputes every place from that seed and\n" +
			"compares them with the record (lines \"arrival place\", as herd export-draw writes them; - reads stdin).",
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			var record []draw.Result
			if recordPath != "" {
				in := cmd.InOrStdin()
				if recordPath != "-" {
					f, err := os.Open(recordPath)
					if err != nil {
						return usageError{"draw verify", fmt.Errorf("flag --record: %w", err)}
					}
					defer f.Close()
					in = f
				}
				var err error
				if record, err = draw.ParseRecord(in); err != nil {
					return fmt.Errorf("reading the record %s: %w", recordPath, err)
				}
			}
			if publicKey != "" {
				if _, err := hex.DecodeString(publicKey); err != nil {
					return usageError{"draw verify", fmt.Errorf("flag --public-key: not hex: %w", err)}
				}
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
			secret, err := draw.ParseSeed(wq.Status.Seed)
			if err != nil {
				return fmt.Errorf("status.seed of waitingqueue %s/%s: %w", ns, args[0], err)
			}
			lines, failure := verifyDraw(wq, secret, strings.ToLower(publicKey), record)
			for _, l := range lines {
				fmt.Fprintln(stdout, l)
			}
			if failure != nil {
				fmt.Fprintf(stdout, "FAILED: %v\n", failure)
				return errShown
			}
			return nil
		},
	}
	verify.Flags().StringVar(&recordPath, "record", "", `the draw's record, lines "arrival place" (herd export-draw); "-" reads stdin`)
	verify.Flags().StringVar(&publicKey, "public-key", "", "the beacon chain's public key, hex, as its operator publishes it: the chain in status must have it")
	cmd.AddCommand(verify)
	return cmd
}

// verifyDraw checks a draw from the room's status: the committed secret, the beacon's round when the
// draw took one, and the record's places. It returns what it found, line by line, and the first
// failure.
func verifyDraw(wq *herdgatev1alpha1.WaitingQueue, secret []byte, publicKey string, record []draw.Result) ([]string, error) {
	st := wq.Status
	if got := draw.Commitment(secret); got != st.SeedCommitment {
		return nil, fmt.Errorf("the seed hashes to %s, not to the commitment %s", got, st.SeedCommitment)
	}
	lines := []string{"ok: the seed hashes to the commitment " + st.SeedCommitment}
	seed := secret
	d := st.Draw
	switch {
	case d == nil || d.SeedSource == "":
		lines = append(lines, "the draw's seed is the committed seed (seed source CommitReveal)")
	case d.SeedSource == herdgatev1alpha1.DrawSeedCommitReveal:
		reason := d.FallbackReason
		if reason == "" {
			reason = "the room draws without a beacon"
		}
		lines = append(lines, "the draw's seed is the committed seed alone (seed source CommitReveal): "+reason)
	case d.Beacon == nil || d.Beacon.Signature == "":
		return lines, fmt.Errorf("the draw is to take a beacon's round, and status holds none yet: has the draw begun?")
	default:
		var err error
		var line string
		if seed, line, err = verifyBeaconRound(wq, secret, publicKey); err != nil {
			return lines, err
		}
		lines = append(lines, line)
	}
	if record == nil {
		return append(lines, "no record given (--record): the places were not checked"), nil
	}
	if err := draw.Verify(seed, "", record); err != nil {
		return lines, err
	}
	return append(lines, fmt.Sprintf("ok: all %d places recomputed from the draw's seed match the record", len(record))), nil
}

// verifyBeaconRound checks the beacon's round in status offline: the chain hashes to the spec's
// chain hash, the round is the first after the opening, its signature verifies; it returns the
// draw's seed.
func verifyBeaconRound(wq *herdgatev1alpha1.WaitingQueue, secret []byte, publicKey string) ([]byte, string, error) {
	d := wq.Status.Draw
	b := d.Beacon
	chain := beacon.Chain{Hash: b.ChainHash, PublicKey: b.PublicKey, Scheme: b.Scheme, Period: time.Duration(b.PeriodSeconds) * time.Second,
		GenesisTime: b.GenesisTime, GenesisSeed: b.GenesisSeed, BeaconID: b.BeaconID}
	if want := specChainHash(wq, d); want != "" && want != b.ChainHash {
		return nil, "", fmt.Errorf("status names the chain %s, the spec the chain %s", b.ChainHash, want)
	}
	if err := chain.CheckHash(); err != nil {
		return nil, "", err
	}
	if publicKey != "" && publicKey != strings.ToLower(b.PublicKey) {
		return nil, "", fmt.Errorf("the chain in status has the public key %s, not the one given (--public-key)", b.PublicKey)
	}
	if d.OpensAt == nil {
		return nil, "", fmt.Errorf("status.draw names no opening")
	}
	if want := chain.RoundAfter(d.OpensAt.Time); uint64(b.Round) != want {
		return nil, "", fmt.Errorf("status names round %d; the first round after the opening at %s is %d", b.Round, d.OpensAt.UTC().Format(time.RFC3339), want)
	}
	var round beacon.Round
	var err1, err2, err3 error
	round.Number = uint64(b.Round)
	round.Randomness, err1 = hex.DecodeString(b.Randomness)
	round.Signature, err2 = hex.DecodeString(b.Signature)
	round.PreviousSignature, err3 = hex.DecodeString(b.PreviousSignature)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, "", fmt.Errorf("the round in status is not hex")
	}
	if err := chain.Verify(round); err != nil {
		return nil, "", err
	}
	seed, err := beacon.Seed(secret, chain.Hash, round.Number, round.Randomness)
	if err != nil {
		return nil, "", err
	}
	return seed, fmt.Sprintf("ok: the draw's seed is the committed seed with round %d of the beacon chain %s (seed source Beacon): "+
		"its signature verifies with the chain's public key %s", round.Number, chain.Hash, chain.PublicKey), nil
}

// specChainHash is the chain hash the spec names for the opening status.draw is for: the event's
// draw, for an event's launch, or the room's.
func specChainHash(wq *herdgatev1alpha1.WaitingQueue, d *herdgatev1alpha1.DrawStatus) string {
	spec := wq.Spec.Draw
	if d.OpensAt != nil {
		for _, e := range wq.Spec.Events {
			if e.Draw != nil && e.Start.Equal(d.OpensAt) {
				spec = e.Draw
			}
		}
	}
	if spec == nil || spec.Beacon == nil {
		return ""
	}
	return spec.Beacon.ChainHash
}
