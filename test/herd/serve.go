package herd

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/go-logr/logr"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// serveRoom serves wq's room on loopback through herdgate-proxy's front, with a fresh HMAC key and
// the Secret values of secrets (by herdgatev1alpha1.SecretRefKey); base is its address, and stop
// ends it (a failure to stop goes to log).
func serveRoom(wq *herdgatev1alpha1.WaitingQueue, store *queue.Store, secrets map[string]string, log io.Writer) (room *admission.Room, base string, stop func(), err error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfigWithSecrets(wq, key, func(key string) ([]byte, error) {
		v, ok := secrets[key]
		if !ok {
			return nil, fmt.Errorf("no value for %s", key)
		}
		return []byte(v), nil
	})
	if err != nil {
		return nil, "", nil, err
	}
	room, err = admission.NewRoom(cfg, store, admission.Options{})
	if err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- front.Serve(serveCtx, room, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: logr.Discard()})
	}()
	return room, "http://" + ln.Addr().String(), func() {
		stopServing()
		if err := <-served; err != nil {
			fmt.Fprintln(log, "herd: stopping the proxy:", err)
		}
	}, nil
}
