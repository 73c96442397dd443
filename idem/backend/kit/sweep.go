package kit

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"
	"weak"
)

// The background sweep's defaults (docs/stores.md).
const (
	// SweepLimit is the most documents one round deletes.
	SweepLimit = 1000
	// SweepEvery is the longest wait between two rounds.
	SweepEvery = time.Minute
	// sweepMinWait is the shortest wait after a round that deleted less
	// than its limit, and the wait before the first round.
	sweepMinWait = time.Second
)

// A SweepRound is what one round of a store's background sweep did.
type SweepRound struct {
	// Store names the store ("sqlite").
	Store string
	// Deleted is how many expired documents the round deleted.
	Deleted int
	// Took is how long the round took.
	Took time.Duration
	// Err is the round's error, nil if it had none. The sweep goes on
	// after an error, waiting longer.
	Err error
	// Next is how long the sweep waits before its next round.
	Next time.Duration
}

// SweepOptions configure a store's background sweep.
type SweepOptions struct {
	// Store names the store in SweepRound, in logged errors and in the
	// sweep metrics (otelidem), as db.system.name spells it
	// ("sqlite", "postgresql", "memory").
	Store string
	// Off starts no sweep: a deployment that runs one sweeping process of
	// its own turns it off in the others.
	Off bool
	// Every is the longest wait between two rounds. Default [SweepEvery].
	Every time.Duration
	// Limit is the most documents one round deletes. Default
	// [SweepLimit].
	Limit int
	// Report is called after every round (never concurrently). Nil logs
	// the rounds that failed with slog.Default, at level Error.
	Report func(SweepRound)
}

// A Sweeping is a store's background sweep, started by [StartSweeping].
type Sweeping struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartSweeping sweeps owner in the background, calling sweep(owner, ctx,
// limit) in rounds until Stop is called or owner is garbage collected, and
// returns nil if o.Off. The first round starts after a second (or Every, if
// shorter), so that a store opened before its tables are made does not
// fail its first round. Then the sweep paces itself by what it found:
//
//   - a round that deleted its limit (a backlog) goes again after as long
//     as it took, so that a backlog is swept at about half of the rate the
//     store sweeps at alone;
//   - after a round that deleted more than half of its limit, the wait
//     halves, down to a second;
//   - after one that deleted less than an eighth of it, or failed, the
//     wait doubles, up to Every.
//
// The sweep holds owner only during a round (a weak pointer between
// rounds): a store dropped without being closed stops its sweep when it is
// collected. A panic in sweep is reported as the round's error.
func StartSweeping[T any](owner *T, sweep func(*T, context.Context, int) (int, error), o SweepOptions) *Sweeping {
	if o.Off {
		return nil
	}
	if o.Every <= 0 {
		o.Every = SweepEvery
	}
	if o.Limit <= 0 {
		o.Limit = SweepLimit
	}
	if o.Report == nil {
		o.Report = logSweepErrors
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sweeping{cancel: cancel, done: make(chan struct{})}
	p := pacer{min: min(sweepMinWait, o.Every), max: o.Every, limit: o.Limit}
	p.wait = p.min
	go sweepLoop(ctx, s, weak.Make(owner), sweep, o, p)
	// The cleanup holds cancel, not owner: owner can be collected.
	runtime.AddCleanup(owner, func(cancel context.CancelFunc) { cancel() }, cancel)
	return s
}

// Stop stops the sweep and waits for a round in progress to end (its sweep
// is cancelled). It is safe to call on a nil Sweeping and more than once.
func (s *Sweeping) Stop() {
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
}

// sweepLoop runs the rounds of s until ctx ends or owner is collected.
func sweepLoop[T any](ctx context.Context, s *Sweeping, owner weak.Pointer[T], sweep func(*T, context.Context, int) (int, error), o SweepOptions, p pacer) {
	defer close(s.done)
	t := time.NewTimer(p.wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		n, err, ok := sweepRound(ctx, owner, sweep, o.Limit)
		if !ok || ctx.Err() != nil {
			return // collected, or stopped: a cancelled round is no failure
		}
		took := time.Since(start)
		next := p.next(n, took, err)
		o.Report(SweepRound{Store: o.Store, Deleted: n, Took: took, Err: err, Next: next})
		t.Reset(next)
	}
}

// sweepRound runs one round on owner, if it is still there (ok). Owner is
// held only for the round.
func sweepRound[T any](ctx context.Context, owner weak.Pointer[T], sweep func(*T, context.Context, int) (int, error), limit int) (n int, err error, ok bool) {
	store := owner.Value()
	if store == nil {
		return 0, nil, false
	}
	defer func() {
		if v := recover(); v != nil {
			n, err, ok = 0, fmt.Errorf("sweep panicked: %v", v), true
		}
	}()
	n, err = sweep(store, ctx, limit)
	return n, err, true
}

// pacer decides how long the sweep waits after each round.
type pacer struct {
	min, max time.Duration
	limit    int
	wait     time.Duration // after a round that did not reach limit
}

func (p *pacer) next(n int, took time.Duration, err error) time.Duration {
	switch {
	case err == nil && n >= p.limit:
		// A backlog: again as soon as the round took, and from the
		// shortest wait once it is done.
		p.wait = p.min
		return max(took, time.Millisecond)
	case err == nil && n > p.limit/2:
		p.wait = max(p.wait/2, p.min)
	case err != nil || n < p.limit/8:
		p.wait = min(p.wait*2, p.max)
	}
	return p.wait
}

// logSweepErrors is the default Report: failed rounds go to slog.Default.
func logSweepErrors(r SweepRound) {
	if r.Err == nil {
		return
	}
	slog.Error("idem: background sweep failed", "store", r.Store, "err", r.Err, "retry_in", r.Next)
}
