package front

import (
	"context"
	"net"
	"testing"

	"github.com/herdgate/herdgate/admission"
)

// serveFast serves room with the fast front on a loopback port until the test ends; it returns the
// front's base URL.
func serveFast(tb testing.TB, room *admission.Room) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := NewFast(room, FastOptions{})
	go func() { _ = f.Serve(ln) }()
	tb.Cleanup(func() { _ = f.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}
