package kit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkit/sdk/idem/backend"
)

// Turns hands out a store's n slots (SQLite's one writer, PostgreSQL's
// pooled connections) to the transactions that wait for one. They wait by
// scope ([backend.ScopeOf] of their context, which the middleware sets to
// the caller): the scopes waiting take turns, round robin, and a scope's
// own transactions go in the order they came. A caller who sends many
// transactions at once thus holds up another's by one of them at most per
// turn, where a single line would put all of them first. The zero Turns
// has no slot; make one with [NewTurns].
type Turns struct {
	mu     sync.Mutex
	free   int
	queues map[string][]chan struct{} // per scope, its waiters, oldest first
	order  []string                   // the scopes with waiters, next turn first
}

// NewTurns returns Turns of n slots.
func NewTurns(n int) *Turns {
	return &Turns{free: n, queues: make(map[string][]chan struct{})}
}

// ErrTurnStopped and ErrTurnTimeout are Acquire's errors when stop is
// closed and when its timeout passes.
var (
	ErrTurnStopped = errors.New("idem: stopped waiting for a turn")
	ErrTurnTimeout = errors.New("idem: waited too long for a turn")
)

// Acquire waits for a slot for the scope of ctx, until ctx ends, stop is
// closed (nil: never) or timeout passes (0: never). Each Acquire that
// returns nil must be followed by one Release.
func (t *Turns) Acquire(ctx context.Context, stop <-chan struct{}, timeout time.Duration) error {
	scope := backend.ScopeOf(ctx)
	t.mu.Lock()
	if t.free > 0 {
		t.free--
		t.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	if len(t.queues[scope]) == 0 {
		t.order = append(t.order, scope)
	}
	t.queues[scope] = append(t.queues[scope], ready)
	t.mu.Unlock()

	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = ErrTurnStopped
	case <-expired:
		err = ErrTurnTimeout
	}
	t.mu.Lock()
	select {
	case <-ready: // handed a slot as it gave up: pass it on
		t.mu.Unlock()
		t.Release()
		return err
	default:
	}
	t.remove(scope, ready)
	t.mu.Unlock()
	return err
}

// remove takes ready out of scope's line; t.mu is held.
func (t *Turns) remove(scope string, ready chan struct{}) {
	q := t.queues[scope]
	for i, c := range q {
		if c == ready {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		t.queues[scope] = q
		return
	}
	delete(t.queues, scope)
	for i, s := range t.order {
		if s == scope {
			t.order = append(t.order[:i:i], t.order[i+1:]...)
			break
		}
	}
}

// Release gives a slot back: to the oldest waiter of the scope whose turn
// is next, which then goes to the back of the order, or to the free ones.
func (t *Turns) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.order) == 0 {
		t.free++
		return
	}
	scope := t.order[0]
	q := t.queues[scope]
	ready := q[0]
	t.order = t.order[1:]
	if len(q) > 1 {
		t.queues[scope] = q[1:]
		t.order = append(t.order, scope)
	} else {
		delete(t.queues, scope)
	}
	close(ready) // the slot is ready's now
}

// Waiting returns the number of transactions waiting for a slot.
func (t *Turns) Waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, q := range t.queues {
		n += len(q)
	}
	return n
}
