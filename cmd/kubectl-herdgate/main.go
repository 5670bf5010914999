// Command kubectl-herdgate is the kubectl plugin of herdgate: kubectl herdgate status, open, queue,
// close, passthrough, draw verify and pass inspect (internal/kubectl).
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/herdgate/herdgate/internal/kubectl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := kubectl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
