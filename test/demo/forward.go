package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// forwardFromHost lets a browser on the host reach the room: it listens on the host's loopback
// (port, or a free one when that is taken) and sends each connection on to target (host:port)
// inside the node's network namespace, where the demo runs. It stops with ctx, or with the stop it
// returns; it returns the address it listens on.
func forwardFromHost(ctx context.Context, port int, target string) (string, func(), error) {
	ln, err := listenInHostNamespace(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		if ln, err = listenInHostNamespace("127.0.0.1:0"); err != nil {
			return "", nil, err
		}
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	wg.Go(func() {
		<-ctx.Done()
		_ = ln.Close()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go pipe(ctx, conn, target)
		}
	})
	return ln.Addr().String(), func() { cancel(); wg.Wait() }, nil
}

// pipe copies between conn and a new connection to target until either side closes, or ctx ends.
func pipe(ctx context.Context, conn net.Conn, target string) {
	defer conn.Close()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close(); _ = up.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

// listenInHostNamespace listens on addr in the host's network namespace (test/demo/run.sh names it
// in HERDGATE_HOST_NETNS; PID 1's otherwise), from a thread that enters it for the listen alone: the
// socket stays in the namespace it was made in, and the thread, left locked, ends with its
// goroutine, so no other goroutine ever runs in that namespace.
func listenInHostNamespace(addr string) (net.Listener, error) {
	hostNamespace := cmp.Or(os.Getenv("HERDGATE_HOST_NETNS"), "/proc/1/ns/net")
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open(hostNamespace)
		if err != nil {
			done <- result{err: fmt.Errorf("opening the host's network namespace: %w", err)}
			return
		}
		defer host.Close()
		if err := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("entering the host's network namespace: %w", err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}
