package idem

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
)

type afterCommitKey struct{}

type afterCommitList struct {
	mu  sync.Mutex // guards fns
	fns []func(context.Context)
}

// AfterCommit registers f to run once the transaction that ctx belongs to has
// committed: after a real commit only, never when the transaction rolls back,
// and never when the middleware answers a replay from a stored result. If the
// store calls fn again after a conflict, hooks registered by the lost attempt are
// dropped. Hooks run in registration order, on the caller's goroutine, with a
// context that is not cancelled when the request is.
//
// A panic in a hook is logged (with slog's default logger) and contained:
// the other hooks still run. Use it for outbound effects that must follow
// the change (see package sideeffect). ctx must be the context passed to a
// [HandlerFor] or to the fn of [Guard.Run]: AfterCommit reports false, and
// registers nothing, for any other.
func AfterCommit(ctx context.Context, f func(ctx context.Context)) bool {
	l, _ := ctx.Value(afterCommitKey{}).(*afterCommitList)
	if l == nil {
		return false
	}
	l.mu.Lock()
	l.fns = append(l.fns, f)
	l.mu.Unlock()
	return true
}

func (l *afterCommitList) run(ctx context.Context) {
	if l == nil {
		return
	}
	l.mu.Lock()
	fns := l.fns
	l.fns = nil
	l.mu.Unlock()
	for _, f := range fns {
		runHook(ctx, f)
	}
}

// runHook runs one hook, containing a panic: the commit has happened, and
// a hook's failure must not take the server down or stop the other hooks.
func runHook(ctx context.Context, f func(context.Context)) {
	defer func() {
		if r := recover(); r != nil {
			slog.ErrorContext(ctx, "idem: after-commit hook panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f(ctx)
}
