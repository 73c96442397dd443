package kit_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem/backend/kit"
)

// fakeStore counts its sweeps; each deletes what next returns.
type fakeStore struct {
	sweeps atomic.Int64
	next   func(n int64) (int, error)
	// in is closed, if set, when a sweep starts; the sweep then waits
	// for its context to end.
	in chan struct{}
}

func (s *fakeStore) Sweep(ctx context.Context, limit int) (int, error) {
	n := s.sweeps.Add(1)
	if s.in != nil {
		close(s.in)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	if s.next != nil {
		return s.next(n)
	}
	return 0, nil
}

// sweepLoops counts the goroutines running a background sweep.
func sweepLoops() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "kit.sweepLoop[")
}

// quiet waits until the earlier tests' sweep goroutines have ended, and
// returns 0.
func quiet(t *testing.T) int {
	waitFor(t, "no sweep goroutine", func() bool { return sweepLoops() == 0 })
	return 0
}

// rounds collects what a sweep reports.
type rounds struct {
	mu sync.Mutex
	r  []kit.SweepRound
}

func (r *rounds) add(x kit.SweepRound) { r.mu.Lock(); r.r = append(r.r, x); r.mu.Unlock() }
func (r *rounds) get() []kit.SweepRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kit.SweepRound(nil), r.r...)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// TestSweepingRunsAndStops: the sweep runs rounds by itself, reports each,
// and Stop ends its goroutine: no round after Stop returns.
func TestSweepingRunsAndStops(t *testing.T) {
	before := quiet(t)
	s := &fakeStore{next: func(n int64) (int, error) {
		if n <= 3 {
			return 5, nil // a backlog: goes again at once
		}
		return 0, nil
	}}
	var got rounds
	sw := kit.StartSweeping(s, (*fakeStore).Sweep, kit.SweepOptions{Store: "fake", Every: 10 * time.Millisecond, Limit: 5, Report: got.add})
	waitFor(t, "the sweep goroutine", func() bool { return sweepLoops() == before+1 })
	waitFor(t, "five rounds", func() bool { return len(got.get()) >= 5 })
	sw.Stop()
	// The goroutine ends right after Stop returns.
	waitFor(t, "the sweep goroutine to end", func() bool { return sweepLoops() == before })
	r := got.get()
	if r[0].Store != "fake" || r[0].Deleted != 5 || r[0].Err != nil || r[0].Next > r[0].Took+time.Millisecond {
		t.Errorf("first round %+v: want 5 deleted by fake, next as soon as it took", r[0])
	}
	if r[4].Deleted != 0 || r[4].Next != 10*time.Millisecond {
		t.Errorf("fifth round %+v: want 0 deleted, next after Every", r[4])
	}
	n := s.sweeps.Load()
	time.Sleep(50 * time.Millisecond)
	if s.sweeps.Load() != n || len(got.get()) != len(r) {
		t.Errorf("%d sweeps after Stop", s.sweeps.Load()-n)
	}
	sw.Stop() // twice is fine
}

// TestSweepingStopCancelsARound: Stop cancels the round in progress and
// waits for it; a cancelled round is not reported as a failure.
func TestSweepingStopCancelsARound(t *testing.T) {
	s := &fakeStore{in: make(chan struct{})}
	var got rounds
	sw := kit.StartSweeping(s, (*fakeStore).Sweep, kit.SweepOptions{Every: time.Millisecond, Report: got.add})
	<-s.in
	sw.Stop()
	if r := got.get(); len(r) != 0 {
		t.Errorf("reported %+v after a round cancelled by Stop", r)
	}
}

// TestSweepingOff: Off starts nothing, and Stop on the nil Sweeping is a
// no-op.
func TestSweepingOff(t *testing.T) {
	before := quiet(t)
	s := &fakeStore{}
	sw := kit.StartSweeping(s, (*fakeStore).Sweep, kit.SweepOptions{Off: true, Every: time.Millisecond})
	if sw != nil || sweepLoops() != before {
		t.Fatalf("Off: got %v and %d sweep goroutines, want nil and %d", sw, sweepLoops(), before)
	}
	time.Sleep(20 * time.Millisecond)
	if n := s.sweeps.Load(); n != 0 {
		t.Errorf("Off: %d sweeps", n)
	}
	sw.Stop()
}

// TestSweepingReportsErrors: a failed round, and a panic in sweep, reach
// Report as the round's error, and the sweep goes on.
func TestSweepingReportsErrors(t *testing.T) {
	s := &fakeStore{next: func(n int64) (int, error) {
		switch n {
		case 1:
			return 0, errors.New("disk full")
		case 2:
			panic("bad state")
		}
		return 1, nil
	}}
	var got rounds
	sw := kit.StartSweeping(s, (*fakeStore).Sweep, kit.SweepOptions{Every: time.Millisecond, Report: got.add})
	waitFor(t, "three rounds", func() bool { return len(got.get()) >= 3 })
	sw.Stop()
	r := got.get()
	if r[0].Err == nil || !strings.Contains(r[0].Err.Error(), "disk full") {
		t.Errorf("first round's error %v, want disk full", r[0].Err)
	}
	if r[1].Err == nil || !strings.Contains(r[1].Err.Error(), "panicked: bad state") {
		t.Errorf("second round's error %v, want the panic", r[1].Err)
	}
	if r[2].Err != nil || r[2].Deleted != 1 {
		t.Errorf("third round %+v, want 1 deleted", r[2])
	}
}

// TestSweepingEndsWithItsStore: a store dropped without Stop stops its
// sweep when it is collected.
func TestSweepingEndsWithItsStore(t *testing.T) {
	before := quiet(t)
	s := &fakeStore{}
	sweeps := &s.sweeps
	_ = kit.StartSweeping(s, (*fakeStore).Sweep, kit.SweepOptions{Every: time.Millisecond})
	waitFor(t, "a round", func() bool { return sweeps.Load() > 0 })
	s = nil
	waitFor(t, "the sweep to end", func() bool { runtime.GC(); return sweepLoops() == before })
}
