package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	say("Sending a herd of %d visitors at once through %s: enter, poll as told, order with the pass", opts.visitors, through)
	results, err := sendHerd(ctx, target, backend, opts, planOf(func(args ...string) (string, error) { return c.Kubectl(ctx, args...) }))
	if err != nil {
		return err
	}
	if err := show(ctx, c); err != nil {
		return err
	}
	if results.OrdersOK != opts.visitors {
		return fmt.Errorf("%d of %d orders went through", results.OrdersOK, opts.visitors)
	}
	if opts.once {
		return nil
	}
	say("The waiting room stays open inside the node: hack/node.sh exec kubectl get wq,pods -A")
	say("Press Ctrl-C to stop; the node and everything in it go")
	<-ctx.Done()
	fmt.Println()
	say("Stopping")
	return nil
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
