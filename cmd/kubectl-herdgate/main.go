// Command kubectl-herdgate is the kubectl plugin of herdgate: kubectl herdgate status, open, queue,
// close, passthrough, draw verify, pass inspect and bundle (internal/kubectl).
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/herdgate/herdgate/internal/kubectl"
)

func main() {
	// The plugin says what happened in its own words (bundle lists what it could not read); the client
	// libraries' logs would only add noise, and controller-runtime's, without a logger, prints a warning
	// with a stack trace on a long run.
	ctrllog.SetLogger(logr.Discard())
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := kubectl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quiet is a go-redis logger that writes nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
