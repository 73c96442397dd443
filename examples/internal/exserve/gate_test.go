package exserve

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// heldCalls are requests a test sends through a gate: each takes its
// slots, says so, and holds them until the test lets it go.
type heldCalls struct {
	t        *testing.T
	g        *gate
	wg       sync.WaitGroup
	admitted chan admission
}

// admission is a request admitted, or refused; let lets it go.
type admission struct {
	user string
	let  func()
}

func newHeldCalls(t *testing.T, g *gate) *heldCalls {
	return &heldCalls{t: t, g: g, admitted: make(chan admission, 256)}
}

// send starts a request of user's for n slots.
func (h *heldCalls) send(user string, n int) {
	h.wg.Go(func() {
		if !h.g.acquire(context.Background(), user, n) {
			h.admitted <- admission{"refused " + user, func() {}}
			return
		}
		done := make(chan struct{})
		h.admitted <- admission{user, sync.OnceFunc(func() { close(done) })}
		<-done
		h.g.release(user, n)
	})
}

// next returns the next request admitted (or refused).
func (h *heldCalls) next() admission {
	h.t.Helper()
	select {
	case a := <-h.admitted:
		return a
	case <-time.After(5 * time.Second):
		h.t.Fatal("no request admitted within 5 s")
		return admission{}
	}
}

// none checks that no request is admitted within d.
func (h *heldCalls) none(d time.Duration) {
	h.t.Helper()
	select {
	case a := <-h.admitted:
		h.t.Fatalf("%s admitted", a.user)
	case <-time.After(d):
	}
}

// drain lets every request go, the running ones and each one admitted
// after them, until n more have been admitted, and waits for all to end.
func (h *heldCalls) drain(running []admission, n int) {
	h.t.Helper()
	for _, a := range running {
		a.let()
	}
	for range n {
		h.next().let()
	}
	h.wg.Wait()
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if len(h.g.users) != 0 || h.g.running != 0 {
		h.t.Fatalf("%d users and %d messages still counted after every request ended", len(h.g.users), h.g.running)
	}
}

// waitRunning waits until the gate counts n messages running.
func (h *heldCalls) waitRunning(n int) {
	h.t.Helper()
	running := func() int { h.g.mu.Lock(); defer h.g.mu.Unlock(); return h.g.running }
	waitUntil(h.t, 5*time.Second, func() bool { return running() == n }, func() string {
		return fmt.Sprintf("%d messages running after 5 s, want %d", running(), n)
	})
}

// waitFor waits until user has n requests waiting.
func (h *heldCalls) waitFor(user string, n int) {
	h.t.Helper()
	waitUntil(h.t, 5*time.Second, func() bool { return h.g.waiting(user) == n }, func() string {
		return fmt.Sprintf("%d of %s's requests wait after 5 s, want %d", h.g.waiting(user), user, n)
	})
}

// runningOf returns how many of user's messages are being handled.
func (g *gate) runningOf(user string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a := g.users[user]; a != nil {
		return a.running
	}
	return 0
}

// With the server's slots held by alice and 64 more of her requests
// waiting, a request of bob's gets the next free slot, before hers; the
// turns then alternate between them.
func TestFairTurn(t *testing.T) {
	g := newGate(64, 4)
	h := newHeldCalls(t, g)
	var running []admission
	for range 4 {
		h.send("alice", 1)
		running = append(running, h.next())
	}
	for range 64 {
		h.send("alice", 1)
	}
	h.waitFor("alice", 64)
	h.send("bob", 1)
	h.send("bob", 1)
	h.waitFor("bob", 2)
	for i, want := range []string{"bob", "alice", "bob", "alice", "alice"} {
		running[0].let() // the oldest running: alice's four, then bob's first
		running = running[1:]
		a := h.next()
		if a.user != want {
			t.Fatalf("slot %d freed: admitted %s, want %s", i+1, a.user, want)
		}
		running = append(running, a)
	}
	if a, b, waiting := g.runningOf("alice"), g.runningOf("bob"), g.waiting("alice"); a != 3 || b != 1 || waiting != 61 {
		t.Fatalf("alice %d running and %d waiting, bob %d running; want 3, 61 and 1", a, waiting, b)
	}
	h.drain(running, 61)
}

// A batch waiting for several of the server's slots is not overtaken by
// later single calls of other users: it runs once enough are free.
func TestBatchKeepsItsTurn(t *testing.T) {
	g := newGate(8, 4)
	h := newHeldCalls(t, g)
	var running []admission
	for range 4 {
		h.send("alice", 1)
		running = append(running, h.next())
	}
	h.send("bob", 3)
	h.waitFor("bob", 1)
	h.send("carol", 1)
	h.waitFor("carol", 1)
	for i := range 2 {
		running[0].let()
		running = running[1:]
		h.waitRunning(3 - i) // released: what it admits is admitted by now
		h.none(10 * time.Millisecond)
	}
	running[0].let()
	running = running[1:]
	if a := h.next(); a.user != "bob" {
		t.Fatalf("three slots free: admitted %s, want bob's batch", a.user)
	} else {
		running = append(running, a)
	}
	running[0].let()
	running = running[1:]
	if a := h.next(); a.user != "carol" {
		t.Fatalf("admitted %s, want carol", a.user)
	} else {
		running = append(running, a)
	}
	h.drain(running, 0)
}

// A user may have perUser requests waiting, and is refused one more; a
// request whose context ends while it waits takes no slot.
func TestGateRefusesAndForgets(t *testing.T) {
	g := newGate(2, 0)
	h := newHeldCalls(t, g)
	h.send("alice", 2)
	first := h.next()
	h.send("alice", 1)
	h.send("alice", 1)
	h.waitFor("alice", 2)
	h.send("alice", 1)
	if a := h.next(); a.user != "refused alice" {
		t.Fatalf("a third waiting request: %s, want refused", a.user)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !g.acquire(ctx, "bob", 2) {
		t.Fatal("bob refused while alice is at her limit")
	}
	got := make(chan bool)
	go func() { got <- g.acquire(ctx, "bob", 1) }()
	h.waitFor("bob", 1)
	cancel()
	if <-got {
		t.Fatal("a request admitted after its context ended")
	}
	if n, waiting := g.runningOf("bob"), g.waiting("bob"); n != 2 || waiting != 0 {
		t.Fatalf("bob: %d running, %d waiting after his request's context ended, want 2 and 0", n, waiting)
	}
	g.release("bob", 2)
	h.drain([]admission{first}, 2)
}
