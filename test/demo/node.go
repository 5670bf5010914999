package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/herdgate/herdgate/test/herd"
	"github.com/herdgate/herdgate/test/node"
)

// runOnNode is the demo on the real node: it runs inside the node's network namespace, where the API
// server, the pods and the Services are reachable (test/demo/run.sh starts the node and stops it).
func runOnNode(ctx context.Context, opts options) error {
	c, err := node.Connect()
	if err != nil {
		return err
	}
	if opts.herdOnly {
		return herdAgain(ctx, c, opts)
	}
	say("Installing charts/herdgate with Helm (redis.deploy=true: an evaluation Redis in the release)")
	if err := c.InstallChart(ctx); err != nil {
		return err
	}
	say("Deploying the orders service (%d connections, %s per order) and applying config/samples", herd.PoolSize, herd.RequestLatency)
	if err := c.Apply(ctx, node.OrdersService("default")); err != nil {
		return err
	}
	sample, err := sampleQueue(filepath.Join(c.Root, "config", "samples", "herdgate_v1alpha1_waitingqueue.yaml"), "", opts.gateway)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, string(sample)); err != nil {
		return err
	}
	say("Waiting for the proxy pods to be Ready")
	if _, err := c.WaitPodsReady(ctx, "default", "app.kubernetes.io/name=herdgate-proxy,app.kubernetes.io/instance=orders", 2, 3*time.Minute); err != nil {
		return err
	}
	if _, err := c.WaitPodsReady(ctx, "default", "app=orders", 1, 2*time.Minute); err != nil {
		return err
	}
	if err := c.WaitQueueReady(ctx, "default", "orders", time.Minute); err != nil {
		return err
	}
	if err := show(ctx, c); err != nil {
		return err
	}
	proxyIP, err := c.ServiceIP(ctx, "default", "orders-herdgate")
	if err != nil {
		return err
	}
	ordersIP, err := c.ServiceIP(ctx, "default", "orders")
	if err != nil {
		return err
	}
	proxy, backend := "http://"+proxyIP, "http://"+ordersIP+":8080"
	for _, u := range []string{backend + "/", proxy + "/.herdgate/healthz"} {
		if err := node.WaitAnswers(ctx, u, time.Minute); err != nil {
			return err
		}
	}

	target, through := proxy, "the proxy's Service "+proxy
	if opts.gateway != "" {
		dir, err := os.MkdirTemp("", "herdgate-demo-gateway-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		say("Starting %s on the node in front of the room (enforcement: Gateway), configured as docs/guides/gateways.md says", opts.gateway)
		url, stop, err := startGateway(ctx, opts.gateway, dir, proxyIP+":80", ordersIP+":8080")
		if err != nil {
			return err
		}
		defer stop()
		target, through = url, opts.gateway+" at "+url
	}
	if err := herdThrough(ctx, c, target, through, backend, opts); err != nil {
		return err
	}
	if opts.once {
		return nil
	}
	return stayOpen(ctx, opts, target)
}

// stayOpen keeps the room open to be looked at: it forwards a port of the host's loopback to it and
// says how to see it, until Ctrl-C.
func stayOpen(ctx context.Context, opts options, target string) error {
	page := "inside the node at " + target + "/.herdgate/?return=/"
	if u, err := url.Parse(target); err == nil {
		to := u.Host
		if u.Port() == "" {
			to = net.JoinHostPort(u.Hostname(), "80")
		}
		addr, stop, err := forwardFromHost(ctx, opts.hostPort, to)
		if err != nil {
			say("Could not forward a port of the host to the room: %v", err)
		} else {
			defer stop()
			page = "http://" + addr + "/.herdgate/?return=/"
		}
	}
	again := "hack/node.sh exec bin/demo --on-node --herd-only --visitors 2000"
	if opts.gateway != "" {
		again += " --gateway " + opts.gateway + " --through " + target
	}
	say("The waiting room stays open. From another terminal, in this folder:")
	for _, l := range [][2]string{
		{"hack/node.sh exec kubectl get wq -o wide", "the room: plan, depth, rates, its last busy spell"},
		{"hack/node.sh exec kubectl herdgate status orders", "the same in words, with its conditions"},
		{"hack/node.sh exec kubectl get pods -A", "everything the node runs"},
		{again, "another herd, through the same room"},
	} {
		fmt.Printf("      %-70s %s\n", l[0], l[1])
	}
	say("The waiting page, from a browser on this machine: %s", page)
	say("Press Ctrl-C to stop; the node and everything in it go")
	<-ctx.Done()
	fmt.Println()
	say("Stopping")
	return nil
}

// herdAgain sends one more herd through the room an open demo serves, and says how it went.
func herdAgain(ctx context.Context, c *node.Cluster, opts options) error {
	target := opts.through
	if target == "" {
		proxyIP, err := c.ServiceIP(ctx, "default", "orders-herdgate")
		if err != nil {
			return fmt.Errorf("finding the room of an open demo (is one running? make demo): %w", err)
		}
		target = "http://" + proxyIP
	}
	ordersIP, err := c.ServiceIP(ctx, "default", "orders")
	if err != nil {
		return err
	}
	return herdThrough(ctx, c, target, target, "http://"+ordersIP+":8080", opts)
}

// herdThrough sends a herd through target (said as through), shows the room once its status holds
// the herd, and fails unless every order went through.
func herdThrough(ctx context.Context, c *node.Cluster, target, through, backend string, opts options) error {
	say("Sending a herd of %d visitors at once through %s: enter, poll as told, order with the pass", opts.visitors, through)
	began := time.Now()
	results, err := sendHerd(ctx, target, backend, opts, planOf(func(args ...string) (string, error) { return c.Kubectl(ctx, args...) }))
	if err != nil {
		return err
	}
	if err := showAfterHerd(ctx, c, began); err != nil {
		return err
	}
	if results.OrdersOK != opts.visitors {
		return fmt.Errorf("%d of %d orders went through (%s)", results.OrdersOK, opts.visitors, strings.Join(results.Errors, "; "))
	}
	return nil
}

// showAfterHerd shows the room once its status tells the herd that began at began: the busy spell
// over (status.lastBusy), which the manager writes within 10 s of its end.
func showAfterHerd(ctx context.Context, c *node.Cluster, began time.Time) error {
	spell, err := c.WaitSpellOver(ctx, "default", "orders", began, 30*time.Second)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		say("The room's status does not show the herd's busy spell over yet: %v", err)
		return show(ctx, c)
	}
	say("LAST BUSY/S is the herd's: its ticks admitted %d at %s a second, up to %d waiting (status.lastBusy);",
		spell.Admitted, spell.AdmittedPerSecond, spell.PeakDepth)
	say("ADMITTED/S averages the last 10 s, which held part of the herd")
	return show(ctx, c)
}

func show(ctx context.Context, c *node.Cluster) error {
	out, err := c.Kubectl(ctx, "get", "wq,pods", "-o", "wide")
	if err != nil {
		return err
	}
	fmt.Println("$ kubectl get wq,pods")
	fmt.Print(out)
	return nil
}
