package queue

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// RouteClientLogs sends go-redis' own messages (dial retries, pool trouble) to log at verbosity 1
// instead of the standard logger: every failure they describe also reaches the caller as an error.
func RouteClientLogs(log logr.Logger) {
	redis.SetLogger(clientLogger{log.WithName("go-redis")})
}

type clientLogger struct{ log logr.Logger }

func (l clientLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.V(1).Info(fmt.Sprintf(format, v...))
}
