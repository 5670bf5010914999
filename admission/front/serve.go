package front

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/herdgate/herdgate/admission"
)

// ServerOptions configure Serve.
type ServerOptions struct {
	// Listener serves visitors; MetricsListener serves /metrics (nil: no metrics server);
	// ExtAuthzListener serves Envoy's ext_authz check over gRPC (nil: none).
	Listener, MetricsListener, ExtAuthzListener net.Listener
	// DrainDelay is how long readyz fails before the server stops accepting, so that load balancers
	// stop sending new requests first.
	DrainDelay time.Duration
	// ShutdownTimeout bounds the wait for requests in flight after the drain.
	ShutdownTimeout time.Duration
	// RedisCheckInterval is how often Redis is pinged to decide FailOpen; 0 means 1 s.
	RedisCheckInterval time.Duration
	// Profiling serves Go's /debug/pprof/ handlers next to /metrics.
	Profiling bool
	Log       logr.Logger
}

// Serve runs the rooms (one Room, or a shared set's) until ctx ends, then drains: readyz fails for
// DrainDelay, the servers stop accepting and wait up to ShutdownTimeout for requests in flight.
func Serve(ctx context.Context, rooms admission.Rooms, o ServerOptions) error {
	errLog := log.New(logrWriter{o.Log}, "", 0)
	front := NewFast(rooms, FastOptions{ErrorLog: errLog})
	var servers []*http.Server
	var listeners []net.Listener
	if o.MetricsListener != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", rooms.MetricsHandler())
		if o.Profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		servers = append(servers, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog})
		listeners = append(listeners, o.MetricsListener)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := front.Serve(o.Listener); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	for i, s := range servers {
		g.Go(func() error {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	if o.ExtAuthzListener != nil {
		grpcServer := NewExtAuthzServer(&ExtAuthz{Room: rooms.Named})
		g.Go(func() error { return grpcServer.Serve(o.ExtAuthzListener) })
		g.Go(func() error {
			<-gctx.Done()
			stopGracefully(grpcServer, o.ShutdownTimeout)
			return nil
		})
	}
	g.Go(func() error {
		rooms.Run(gctx, o.RedisCheckInterval)
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		rooms.StartDrain()
		if ctx.Err() != nil {
			o.Log.Info("Draining", "delay", o.DrainDelay)
			time.Sleep(o.DrainDelay)
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
		defer cancel()
		errs := []error{front.Shutdown(shutdownCtx)}
		for _, s := range servers {
			errs = append(errs, s.Shutdown(shutdownCtx))
		}
		return errors.Join(errs...)
	})
	return g.Wait()
}

type logrWriter struct{ log logr.Logger }

func (w logrWriter) Write(b []byte) (int, error) {
	w.log.V(1).Info(string(b))
	return len(b), nil
}

// stopGracefully lets the gRPC server finish the checks in flight, for at most timeout.
func stopGracefully(s *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		s.Stop()
	}
}
