package exserve

import (
	"context"
	"sync"
)

// gate admits JSON-RPC messages to be handled: at most perUser of one
// user's at once and at most total of all users' at once (0 turns either
// off). A request that cannot run yet waits, at most perUser requests of a
// user (total when perUser is 0); one more is refused. When slots free, the
// next turn goes to the waiting user whose last turn is the oldest (a user
// who has had none first), round robin, so that one user's queue never
// sits in front of another user's call; each user's requests run in the
// order they came. A refusal is an HTTP answer, before the go-sdk makes a
// session, so that a flood of them costs little. A request whose client
// goes away releases its slots when its handler returns: the go-sdk then
// cancels its calls.
type gate struct {
	perUser, total int

	mu      sync.Mutex
	running int                 // all users' messages being handled
	turns   uint64              // turns given so far
	entries uint64              // accounts made so far
	users   map[string]*account // an entry lives while its user has messages running or waiting
}

// account is one user's share of a gate; guarded by gate.mu.
type account struct {
	running  int
	queue    []*waiter // the user's waiting requests, oldest first
	lastTurn uint64    // the gate's turn count when the user last got a turn; 0 for none
	entry    uint64    // the account's number, for ties: the older first
}

// waiter is one request waiting for its slots.
type waiter struct {
	n        int
	admitted chan struct{} // closed once admitted
	granted  bool          // guarded by gate.mu
}

func newGate(perUser, total int) *gate {
	return &gate{perUser: perUser, total: total, users: map[string]*account{}}
}

// off reports whether the gate lets everything through.
func (g *gate) off() bool { return g.perUser == 0 && g.total == 0 }

// acquire takes n slots for a request of user's, waiting for its turn. It
// reports false, having taken none, when the user already has as many
// requests waiting as it may, or when ctx ends first.
func (g *gate) acquire(ctx context.Context, user string, n int) bool {
	if g.off() {
		return true
	}
	g.mu.Lock()
	a := g.users[user]
	if a == nil {
		g.entries++
		a = &account{entry: g.entries}
		g.users[user] = a
	}
	w := &waiter{n: n, admitted: make(chan struct{})}
	a.queue = append(a.queue, w)
	g.admit()
	if !w.granted && len(a.queue) > g.maxWaiting() {
		// w is last in the queue and not its head: taking it out changes
		// no one's turn.
		a.queue = a.queue[:len(a.queue)-1]
		g.mu.Unlock()
		return false
	}
	g.mu.Unlock()
	select {
	case <-w.admitted:
		return true
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted { // admitted meanwhile
		g.give(user, a, n)
		return false
	}
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	g.admit() // w may have held the next turn
	g.forget(user, a)
	return false
}

// maxWaiting is how many requests of one user may wait.
func (g *gate) maxWaiting() int {
	if g.perUser > 0 {
		return g.perUser
	}
	return g.total
}

// release gives back n slots of user's.
func (g *gate) release(user string, n int) {
	if g.off() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.give(user, g.users[user], n)
}

// give returns n slots of a, user's account, and hands out the turns they
// make; g.mu is held.
func (g *gate) give(user string, a *account, n int) {
	a.running -= n
	g.running -= n
	g.admit()
	g.forget(user, a)
}

// forget drops user's account once it holds nothing; g.mu is held.
func (g *gate) forget(user string, a *account) {
	if a.running == 0 && len(a.queue) == 0 {
		delete(g.users, user)
	}
}

// admit hands out turns while the slots allow: each to the oldest request
// of the user whose last turn is the oldest, among the users whose own
// limit lets that request run. When that request needs more of the
// server's slots than are free, no one else's goes before it; g.mu is held.
func (g *gate) admit() {
	for {
		var next *account
		for _, a := range g.users {
			if len(a.queue) == 0 || g.perUser > 0 && a.running+a.queue[0].n > g.perUser {
				continue
			}
			if next == nil || a.lastTurn < next.lastTurn || a.lastTurn == next.lastTurn && a.entry < next.entry {
				next = a
			}
		}
		if next == nil {
			return
		}
		w := next.queue[0]
		if g.total > 0 && g.running+w.n > g.total {
			return
		}
		next.queue = next.queue[1:]
		next.running += w.n
		g.running += w.n
		g.turns++
		next.lastTurn = g.turns
		w.granted = true
		close(w.admitted)
	}
}

// waiting returns how many of user's requests wait for a slot.
func (g *gate) waiting(user string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a := g.users[user]; a != nil {
		return len(a.queue)
	}
	return 0
}
