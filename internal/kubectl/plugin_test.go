package kubectl

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpNamesThePluginAsKubectlRunsIt: kubectl runs the plugin as kubectl herdgate, and every
// usage line says so, never kubectl alone.
func TestHelpNamesThePluginAsKubectlRunsIt(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"status", "--help"}, {"draw", "verify", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := Run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, stderr.String())
		}
		_, usage, _ := strings.Cut(stdout.String(), "Usage:\n")
		line, _, _ := strings.Cut(usage, "\n")
		if want := "  kubectl herdgate " + strings.Join(args[:len(args)-1], " "); !strings.HasPrefix(line, want) {
			t.Errorf("%v: usage %q; want it to begin %q", args, line, want)
		}
	}
}
