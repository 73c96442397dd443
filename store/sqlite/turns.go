package sqlite

import (
	"context"
	"errors"
	"sync"
	"time"
)

// turns hands out a Store's one writer token. The transactions waiting for
// it wait by scope (backend.WithScope): the scopes take turns, round robin,
// and a scope's own transactions go in the order they came. A scope that
// sends many transactions at once thus holds up another's by one of its
// transactions at most, where a single line would put all of them first.
type turns struct {
	mu     sync.Mutex
	held   bool
	queues map[string][]chan struct{} // per scope, its waiters, oldest first
	order  []string                   // the scopes with waiters, next turn first
}

var errTurnTimeout = errors.New("sqlite: waited a minute for this store's other transactions (is fn waiting for a Run of the same store?)")

// acquire waits for the token for scope, until ctx ends, stop is closed
// (nil: never) or timeout passes.
func (t *turns) acquire(ctx context.Context, scope string, stop <-chan struct{}, timeout time.Duration) error {
	t.mu.Lock()
	if !t.held {
		t.held = true
		t.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	if t.queues == nil {
		t.queues = make(map[string][]chan struct{})
	}
	if len(t.queues[scope]) == 0 {
		t.order = append(t.order, scope)
	}
	t.queues[scope] = append(t.queues[scope], ready)
	t.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = errClosedStore
	case <-timer.C:
		err = errTurnTimeout
	}
	t.mu.Lock()
	select {
	case <-ready: // handed the token as it gave up: pass it on
		t.mu.Unlock()
		t.release()
		return err
	default:
	}
	t.remove(scope, ready)
	t.mu.Unlock()
	return err
}

// remove takes ready out of scope's line; t.mu is held.
func (t *turns) remove(scope string, ready chan struct{}) {
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

// release hands the token to the oldest waiter of the scope whose turn is
// next, which then goes to the back of the order, or frees it.
func (t *turns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.order) == 0 {
		t.held = false
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
	close(ready) // held stays true: the token is ready's now
}
