package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// parallel calls f(0) … f(n-1) from workers goroutines; the first error stops it.
func parallel(ctx context.Context, workers, n int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func waitFor(ctx context.Context, limit time.Duration, what string, done func() (bool, error)) error {
	return waitForEvery(ctx, 500*time.Millisecond, limit, what, done)
}

// waitForEvery asks done every interval until it says true, fails, or limit passes.
func waitForEvery(ctx context.Context, interval, limit time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", limit, what)
		}
		if err := sleep(ctx, interval); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
