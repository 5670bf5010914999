package kubectl

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
)

func (c *cli) passCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "pass", Short: "Look into a room's passes"}
	var visitor string
	inspect := &cobra.Command{
		Use:   "inspect NAME PASS",
		Short: "Decode a pass and check it against the room's keys, as its proxies do",
		Long: "pass inspect checks a pass (the value of the room's herdgate_pass_<room ID> cookie, or X-Herdgate-Pass) with the room's keys\n" +
			"from its Secret, as the proxy does, and says whose it is and when it is valid. It reads the room's Secret,\n" +
			"so it needs get on secrets. Whether the workload released the session is kept in Redis and not checked.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{"pass inspect", fmt.Errorf("pass inspect needs the WaitingQueue's name and the pass (got %d arguments)", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := c.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			wq := &herdgatev1alpha1.WaitingQueue{}
			if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: args[0]}, wq); err != nil {
				return fmt.Errorf("reading waitingqueue %s/%s: %w", ns, args[0], err)
			}
			secret := &corev1.Secret{}
			if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: wq.SecretName()}, secret); err != nil {
				return fmt.Errorf("reading the room's keys from secret %s/%s: %w", ns, wq.SecretName(), err)
			}
			room := pass.Room{UID: string(wq.UID), Namespace: wq.Namespace, Name: wq.Name, HMACKey: secret.Data[herdgatev1alpha1.SecretHMACKey]}
			if wq.Spec.Pass != nil && wq.Spec.Pass.Format == herdgatev1alpha1.PassFormatJWT {
				keys, ok := secret.Data[herdgatev1alpha1.SecretPassKeys]
				if !ok {
					return fmt.Errorf("secret %s/%s has no key %s, which holds the keys of the room's JWT passes", ns, wq.SecretName(), herdgatev1alpha1.SecretPassKeys)
				}
				room.JWT, room.JWTKeys = true, keys
			}
			_, passes, err := room.Passes()
			if err != nil {
				return fmt.Errorf("reading the room's pass keys from secret %s/%s: %w", ns, wq.SecretName(), err)
			}
			now := time.Now()
			p, result := passes.Verify(args[1], visitor, now)
			if result != pass.Valid && result != pass.Expired && result != pass.NotYetValid && result != pass.WrongVisitor {
				fmt.Fprintf(stdout, "%s: the pass does not verify with the keys of waitingqueue %s/%s\n", result, ns, wq.Name)
				return errShown
			}
			fmt.Fprintf(stdout, "%s: a pass of waitingqueue %s/%s for visitor %q, valid from %s to %s (%s)\n", result, ns, wq.Name,
				p.Visitor, p.NotBefore.UTC().Format(time.RFC3339), p.Expiry.UTC().Format(time.RFC3339), validity(p, now))
			if result != pass.Valid {
				return errShown
			}
			return nil
		},
	}
	inspect.Flags().StringVar(&visitor, "visitor", "", "also check that the pass is this visitor's (the identity header's value, or the visitor cookie's ID)")
	cmd.AddCommand(inspect)
	return cmd
}

// validity says where now lies in the pass's life.
func validity(p pass.Pass, now time.Time) string {
	switch {
	case now.Before(p.NotBefore):
		return "valid in " + p.NotBefore.Sub(now).Round(time.Second).String()
	case now.After(p.Expiry):
		return "expired " + now.Sub(p.Expiry).Round(time.Second).String() + " ago"
	}
	return "valid for another " + p.Expiry.Sub(now).Round(time.Second).String()
}
