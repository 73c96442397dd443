package kit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// TestTurnsRoundRobin: with both slots held, one scope queues four
// waiters and two other scopes one each; as slots come back, the scopes
// take turns and each scope's waiters go in order.
func TestTurnsRoundRobin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := kit.NewTurns(2)
	for range 2 {
		if err := tr.Acquire(ctx, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, w := range [][2]string{{"alice", "a1"}, {"alice", "a2"}, {"alice", "a3"}, {"bob", "b1"}, {"alice", "a4"}, {"carol", "c1"}} {
		wg.Go(func() {
			if err := tr.Acquire(backend.WithScope(ctx, w[0]), nil, 0); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, w[1])
			mu.Unlock()
		})
		for tr.Waiting() < i+1 {
			if ctx.Err() != nil {
				t.Fatalf("%s is not waiting", w[1])
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Hand the slots out one at a time, so that the order is the one
	// they were handed in.
	for i := range 6 {
		tr.Release()
		for {
			mu.Lock()
			n := len(order)
			mu.Unlock()
			if n == i+1 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("slot %d was not handed on", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if got, want := fmt.Sprint(order), "[a1 b1 c1 a2 a3 a4]"; got != want {
		t.Fatalf("slots went to %s, want %s", got, want)
	}
}

// TestTurnsGiveUp: a waiter whose context ends, or whose stop channel is
// closed, or whose timeout passes leaves the line with its error, and the
// slot goes to the next.
func TestTurnsGiveUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := kit.NewTurns(1)
	if err := tr.Acquire(ctx, nil, 0); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	errs := make(chan error, 3)
	go func() { errs <- tr.Acquire(short, nil, 0) }()
	go func() { errs <- tr.Acquire(ctx, stopped, 0) }()
	go func() { errs <- tr.Acquire(ctx, nil, 50*time.Millisecond) }()
	for tr.Waiting() < 3 {
		time.Sleep(time.Millisecond)
	}
	stop()
	close(stopped)
	got := map[string]bool{}
	for range 3 {
		err := <-errs
		got[fmt.Sprint(err)] = true
	}
	for _, want := range []error{context.Canceled, kit.ErrTurnStopped, kit.ErrTurnTimeout} {
		if !got[want.Error()] {
			t.Errorf("no waiter gave up with %v: %v", want, got)
		}
	}
	if tr.Waiting() != 0 {
		t.Fatalf("%d still waiting", tr.Waiting())
	}
	tr.Release()
	if err := tr.Acquire(ctx, nil, time.Second); err != nil {
		t.Fatalf("the slot was not free after the waiters gave up: %v", err)
	}
}
