package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/sideeffect"
)

// seLease is the claim lease used by the side-effect subtests; the clock is
// moved past it to make a claim abandoned.
const seLease = time.Minute

// sePastLease moves the clock from a claim to past its lease and the grace
// after it (a tenth of the lease), so the claim counts as abandoned.
const sePastLease = seLease + seLease/10 + time.Second

var seEpoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// runSideEffect checks the markers of package sideeffect on the store: one
// post under concurrent callers, release on failure, recovery of an
// abandoned claim, fencing of a stale owner, and no marker from a rolled-back
// transaction.
func runSideEffect(t *testing.T, h Harness) {
	t.Run("ConcurrentOncePostsOnce", func(t *testing.T) { seConcurrentOnce(t, h) })
	t.Run("SecondCallerDoesNotPost", func(t *testing.T) { seSecondCaller(t, h) })
	t.Run("FailedPostReleases", func(t *testing.T) { seFailedPost(t, h) })
	t.Run("RecoverAbandonedClaim", func(t *testing.T) { seRecoverAbandoned(t, h) })
	t.Run("RecoverTakeoverIsConditional", func(t *testing.T) { seRecoverTakeover(t, h) })
	t.Run("RecoverStaleVerdict", func(t *testing.T) { seRecoverStaleVerdict(t, h) })
	t.Run("ClaimIsAConditionalWrite", func(t *testing.T) { seClaimConditional(t, h) })
	t.Run("Fencing", func(t *testing.T) { seFencing(t, h) })
	t.Run("FencedWriteIsConditional", func(t *testing.T) { seFencedConditional(t, h) })
	t.Run("RolledBackWriteLeavesNoMarker", func(t *testing.T) { seRollback(t, h) })
	t.Run("RepeatedWritePostsOnce", func(t *testing.T) { seRepeatedWrite(t, h) })
	t.Run("RecoverPostsPending", func(t *testing.T) { seRecoverPending(t, h) })
	t.Run("RecoverRacesOnce", func(t *testing.T) { seRecoverRacesOnce(t, h) })
	t.Run("RecoverRepostFailureReleases", func(t *testing.T) { seRecoverRepostFails(t, h) })
	t.Run("ConcurrentIntendDifferentKeys", func(t *testing.T) { seConcurrentIntend(t, h) })
	t.Run("ManyMarkersAcrossPages", func(t *testing.T) { seManyMarkers(t, h) })
	t.Run("IndexEntryRemovedOnce", func(t *testing.T) { seIndexRemovedOnce(t, h) })
}

// sePoster is a post function that counts its calls and answers "ref-<n>".
type sePoster struct {
	calls atomic.Int64
	mu    sync.Mutex // guards keys
	keys  []string
}

func (p *sePoster) post(ctx context.Context, key string, payload json.RawMessage) (string, error) {
	n := p.calls.Add(1)
	p.mu.Lock()
	p.keys = append(p.keys, key)
	p.mu.Unlock()
	return fmt.Sprintf("ref-%d", n), nil
}

func seNoPost(t *testing.T) sideeffect.PostFunc {
	return func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		t.Errorf("post called for a marker that must not be posted")
		return "", errors.New("must not post")
	}
}

// seNew makes the store for one side-effect test, on a clock at seEpoch, and
// the Effects over it that the test's calls share (see seEffects).
func seNew(t *testing.T, h Harness) (idem.Store, *Clock, *sideeffect.Effects) {
	clk := NewClock(seEpoch)
	s := h.New(t, clk.Now)
	return s, clk, seEffects(s, clk, 0)
}

// seEffects returns Effects over s on clk with the suite's lease and the
// given wait (0 for the default, negative for none).
func seEffects(s idem.Store, clk *Clock, wait time.Duration) *sideeffect.Effects {
	return sideeffect.New(s, &sideeffect.Options{Clock: clk.Now, Lease: seLease, Wait: wait})
}

// seIntend commits a marker for key in a transaction of its own on s.
func seIntend(t *testing.T, s idem.Store, fx *sideeffect.Effects, key string, payload any) {
	t.Helper()
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, key, payload)
	})
	if err != nil {
		t.Fatalf("Intend: %v", err)
	}
}

func seGet(t *testing.T, fx *sideeffect.Effects, key string) sideeffect.Marker {
	t.Helper()
	m, err := fx.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return m
}

func seListKeys(t *testing.T, fx *sideeffect.Effects, state sideeffect.State) []string {
	t.Helper()
	ms, err := fx.List(context.Background(), state)
	if err != nil {
		t.Fatalf("List(%s): %v", state, err)
	}
	keys := []string{}
	for _, m := range ms {
		if m.State != state {
			t.Errorf("List(%s) returned a marker in state %s", state, m.State)
		}
		keys = append(keys, m.Key)
	}
	return keys
}

// seAbandon claims key with Once and lets the claiming goroutine die inside
// the post (runtime.Goexit), so the claim is never completed or released.
func seAbandon(t *testing.T, fx *sideeffect.Effects, key string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fx.Once(context.Background(), key, func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			runtime.Goexit()
			return "", nil
		})
		t.Error("Once returned after its post died")
	}()
	<-done
	if m := seGet(t, fx, key); m.State != sideeffect.Claimed || m.Attempts != 1 {
		t.Fatalf("after the owner died: state %s attempts %d, want claimed 1", m.State, m.Attempts)
	}
}

// Must-show 1: 32 concurrent Once on one key post once, and every caller
// learns the same ref.
func seConcurrentOnce(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	const key = "concurrent"
	n := h.goroutines(32)
	seIntend(t, s, fx, key, map[string]string{"text": "hello"})

	waiting := seEffects(s, clk, 30*time.Second)
	var p sePoster
	slow := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		time.Sleep(20 * time.Millisecond) // let the others find the claim
		return p.post(ctx, key, payload)
	}
	start := make(chan struct{})
	refs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			refs[i], errs[i] = waiting.Once(context.Background(), key, slow)
		})
	}
	close(start)
	wg.Wait()
	if got := p.calls.Load(); got != 1 {
		t.Fatalf("%d concurrent Once posted %d times, want 1", n, got)
	}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("caller %d: %v", i, errs[i])
		} else if refs[i] != "ref-1" {
			t.Errorf("caller %d learned ref %q, want %q", i, refs[i], "ref-1")
		}
	}
	if p.keys[0] != key {
		t.Errorf("post got key %q, want the marker key %q", p.keys[0], key)
	}
	m := seGet(t, fx, key)
	if m.State != sideeffect.Done || m.Ref != "ref-1" || m.Attempts != 1 {
		t.Errorf("marker: state %s ref %q attempts %d, want done ref-1 1", m.State, m.Ref, m.Attempts)
	}
	if keys := seListKeys(t, fx, sideeffect.Pending); len(keys) != 0 {
		t.Errorf("pending markers after done: %v", keys)
	}
}

// The claim is a write at the version read, not a read followed by a write:
// two callers that both read the marker pending, on a store that checks
// only its writes' own conditions (writeChecksOnly), still post once.
func seClaimConditional(t *testing.T, h Harness) {
	inner, clk, fx := seNew(t, h)
	const key = "claim-conditional"
	seIntend(t, inner, fx, key, "payload")
	var reads atomic.Int64
	bothRead := make(chan struct{})
	s := &writeChecksOnly{Store: inner, afterRead: func(k idem.Key) {
		if k.Collection != seMarkerCollection {
			return
		}
		switch reads.Add(1) {
		case 1:
			select {
			case <-bothRead:
			case <-time.After(5 * time.Second):
				t.Error("the second caller did not read the marker within 5 s")
			}
		case 2:
			close(bothRead)
		}
	}}
	waiting := seEffects(s, clk, 10*time.Second)
	var p sePoster
	refs, errs := make([]string, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			refs[i], errs[i] = waiting.Once(context.Background(), key, p.post)
		})
	}
	wg.Wait()
	if got := p.calls.Load(); got != 1 {
		t.Errorf("two callers that both read the marker pending posted %d times, want 1", got)
	}
	for i := range 2 {
		if errs[i] != nil || refs[i] != "ref-1" {
			t.Errorf("caller %d = %q, %v; want ref-1", i, refs[i], errs[i])
		}
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Attempts != 1 {
		t.Errorf("marker: state %s attempts %d, want done 1", m.State, m.Attempts)
	}
}

// seMarkerCollection is where package sideeffect keeps its markers.
const seMarkerCollection = "idem_markers"

// A claim's late complete writes at the version it read: on a store that
// checks only its writes' own conditions (writeChecksOnly), owner A's
// complete that read the marker still claimed by A, before B took it over
// and completed, is fenced and leaves B's outcome.
func seFencedConditional(t *testing.T, h Harness) {
	inner, clk, fx := seNew(t, h)
	const key = "fenced-conditional"
	seIntend(t, inner, fx, key, "payload")
	var takeover atomic.Bool // armed: the next marker read is A's complete's
	var p sePoster
	var b sideeffect.Report
	var bErr error
	notHappened := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.NotHappened, "", nil
	}
	s := &writeChecksOnly{Store: inner, afterRead: func(k idem.Key) {
		if k.Collection != seMarkerCollection || !takeover.CompareAndSwap(true, false) {
			return
		}
		// Between A's read and A's write, A's lease runs out and B takes
		// the marker over and posts.
		clk.Advance(sePastLease)
		b, bErr = fx.Recover(context.Background(), p.post, notHappened)
	}}
	postA := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		takeover.Store(true)
		return "ref-A", nil
	}
	ref, err := seEffects(s, clk, 0).Once(context.Background(), key, postA)
	if bErr != nil || !slices.Equal(b.Posted, []string{key}) {
		t.Fatalf("B's Recover = %+v, %v; want the key posted", b, bErr)
	}
	if !errors.Is(err, sideeffect.ErrFenced) || ref != "" {
		t.Errorf("A's late complete: ref %q err %v, want ErrFenced", ref, err)
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Ref != "ref-1" || m.Attempts != 2 {
		t.Errorf("marker: state %s ref %q attempts %d, want done ref-1 2 (B's)", m.State, m.Ref, m.Attempts)
	}
}

// A caller that finds the marker claimed does not post: it waits, or with no
// wait gets ErrInFlight.
func seSecondCaller(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	const key = "second"
	seIntend(t, s, fx, key, "payload")
	var p sePoster
	var innerErr error
	outer := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		// While this claim is held, another caller tries.
		_, innerErr = seEffects(s, clk, -1).Once(ctx, key, p.post)
		return "outer-ref", nil
	}
	ref, err := fx.Once(context.Background(), key, outer)
	if err != nil || ref != "outer-ref" {
		t.Fatalf("Once = %q, %v; want outer-ref", ref, err)
	}
	if !errors.Is(innerErr, sideeffect.ErrInFlight) {
		t.Errorf("second caller during the claim: err %v, want ErrInFlight", innerErr)
	}
	if got := p.calls.Load(); got != 0 {
		t.Errorf("second caller posted %d times while the marker was claimed", got)
	}
	ref, err = fx.Once(context.Background(), key, seNoPost(t))
	if err != nil || ref != "outer-ref" {
		t.Errorf("Once on a done marker = %q, %v; want outer-ref", ref, err)
	}
}

// Must-show 2: a failed post releases the marker; the next call posts once.
func seFailedPost(t *testing.T, h Harness) {
	s, _, fx := seNew(t, h)
	const key = "fails-once"
	seIntend(t, s, fx, key, "payload")
	errDown := errors.New("target is down")
	var failed atomic.Int64
	fail := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		failed.Add(1)
		return "", errDown
	}
	if _, err := fx.Once(context.Background(), key, fail); !errors.Is(err, errDown) {
		t.Fatalf("Once with a failing post: err %v, want the post's error", err)
	}
	m := seGet(t, fx, key)
	if m.State != sideeffect.Pending || m.Attempts != 1 || m.Failures != 1 {
		t.Fatalf("after a failed post: state %s attempts %d failures %d, want pending 1 1", m.State, m.Attempts, m.Failures)
	}
	if keys := seListKeys(t, fx, sideeffect.Pending); !slices.Equal(keys, []string{key}) {
		t.Errorf("List(pending) = %v, want [%s]", keys, key)
	}
	var p sePoster
	ref, err := fx.Once(context.Background(), key, p.post)
	if err != nil || ref != "ref-1" {
		t.Fatalf("next Once = %q, %v; want ref-1", ref, err)
	}
	ref, err = fx.Once(context.Background(), key, p.post)
	if err != nil || ref != "ref-1" {
		t.Fatalf("Once after done = %q, %v; want ref-1", ref, err)
	}
	if failed.Load() != 1 || p.calls.Load() != 1 {
		t.Errorf("posts: %d failed, %d succeeded; want 1 and 1", failed.Load(), p.calls.Load())
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Attempts != 2 || m.Failures != 1 {
		t.Errorf("marker: state %s attempts %d failures %d, want done 2 1", m.State, m.Attempts, m.Failures)
	}
}

// Must-show 3: a claim that is never completed is settled by Recover after
// its lease, according to reconcile.
func seRecoverAbandoned(t *testing.T, h Harness) {
	const key = "abandoned"
	payload := map[string]string{"text": "hello"}
	setup := func(t *testing.T) *sideeffect.Effects {
		s, clk, fx := seNew(t, h)
		seIntend(t, s, fx, key, payload)
		seAbandon(t, fx, key)

		// Within the lease the claim is its owner's: Recover leaves it.
		noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
			t.Errorf("reconcile asked about a claim under a live lease")
			return sideeffect.CannotTell, "", nil
		}
		r, err := fx.Recover(context.Background(), seNoPost(t), noReconcile)
		if err != nil || !slices.Equal(r.Busy, []string{key}) {
			t.Fatalf("Recover within the lease = %+v, %v; want the key busy", r, err)
		}

		clk.Advance(sePastLease)
		if _, err := fx.Once(context.Background(), key, seNoPost(t)); !errors.Is(err, sideeffect.ErrUnknown) {
			t.Fatalf("Once on an expired claim: err %v, want ErrUnknown", err)
		}
		if keys := seListKeys(t, fx, sideeffect.Unknown); !slices.Equal(keys, []string{key}) {
			t.Fatalf("List(unknown) = %v, want [%s]", keys, key)
		}
		return fx
	}
	reconcileTo := func(t *testing.T, o sideeffect.Outcome, ref string, asked *int) sideeffect.ReconcileFunc {
		return func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
			*asked++
			var got map[string]string
			if m.Key != key || m.State != sideeffect.Unknown || json.Unmarshal(m.Payload, &got) != nil || got["text"] != "hello" {
				t.Errorf("reconcile got marker %+v", m)
			}
			return o, ref, nil
		}
	}

	t.Run("Happened", func(t *testing.T) {
		fx := setup(t)
		asked := 0
		r, err := fx.Recover(context.Background(), seNoPost(t), reconcileTo(t, sideeffect.Happened, "found-ref", &asked))
		if err != nil || !slices.Equal(r.Reconciled, []string{key}) || asked != 1 {
			t.Fatalf("Recover = %+v, %v (asked %d); want the key reconciled", r, err, asked)
		}
		if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Ref != "found-ref" {
			t.Errorf("marker: state %s ref %q, want done found-ref", m.State, m.Ref)
		}
		ref, err := fx.Once(context.Background(), key, seNoPost(t))
		if err != nil || ref != "found-ref" {
			t.Errorf("Once after reconcile = %q, %v; want found-ref", ref, err)
		}
		if keys := seListKeys(t, fx, sideeffect.Unknown); len(keys) != 0 {
			t.Errorf("List(unknown) after reconcile = %v, want none", keys)
		}
	})

	t.Run("NotHappened", func(t *testing.T) {
		fx := setup(t)
		var p sePoster
		asked := 0
		r, err := fx.Recover(context.Background(), p.post, reconcileTo(t, sideeffect.NotHappened, "", &asked))
		if err != nil || !slices.Equal(r.Posted, []string{key}) {
			t.Fatalf("Recover = %+v, %v; want the key posted", r, err)
		}
		if got := p.calls.Load(); got != 1 {
			t.Fatalf("Recover posted %d times, want 1", got)
		}
		m := seGet(t, fx, key)
		if m.State != sideeffect.Done || m.Ref != "ref-1" || m.Attempts != 2 {
			t.Errorf("marker: state %s ref %q attempts %d, want done ref-1 2", m.State, m.Ref, m.Attempts)
		}
		r, err = fx.Recover(context.Background(), p.post, reconcileTo(t, sideeffect.NotHappened, "", &asked))
		if err != nil || p.calls.Load() != 1 || asked != 1 || len(r.Posted) != 0 {
			t.Errorf("second Recover = %+v, %v: posted %d times in all, asked %d; want 1 and 1", r, err, p.calls.Load(), asked)
		}
	})

	t.Run("CannotTell", func(t *testing.T) {
		fx := setup(t)
		asked := 0
		for run := 1; run <= 2; run++ {
			r, err := fx.Recover(context.Background(), seNoPost(t), reconcileTo(t, sideeffect.CannotTell, "", &asked))
			if err != nil || !slices.Equal(r.Unknown, []string{key}) || asked != run {
				t.Fatalf("Recover run %d = %+v, %v (asked %d); want the key unknown", run, r, err, asked)
			}
		}
		if keys := seListKeys(t, fx, sideeffect.Unknown); !slices.Equal(keys, []string{key}) {
			t.Errorf("List(unknown) = %v, want [%s]", keys, key)
		}
		if _, err := fx.Once(context.Background(), key, seNoPost(t)); !errors.Is(err, sideeffect.ErrUnknown) {
			t.Errorf("Once on an unknown marker: err %v, want ErrUnknown", err)
		}
	})
}

// Two Recover runs that both reconcile an abandoned claim as not committed
// post it once: the take-over claim is conditional on the stale token.
func seRecoverTakeover(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	const key = "takeover"
	seIntend(t, s, fx, key, "payload")
	seAbandon(t, fx, key)
	clk.Advance(sePastLease)

	var p sePoster
	var inner sideeffect.Report
	var innerErr error
	notHappened := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.NotHappened, "", nil
	}
	outer := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		// Between this run's reconcile and its take-over, another run
		// reconciles and posts.
		inner, innerErr = fx.Recover(ctx, p.post, notHappened)
		return sideeffect.NotHappened, "", nil
	}
	r, err := fx.Recover(context.Background(), p.post, outer)
	if innerErr != nil || !slices.Equal(inner.Posted, []string{key}) {
		t.Fatalf("inner Recover = %+v, %v; want the key posted", inner, innerErr)
	}
	if err != nil || len(r.Posted) != 0 || !slices.Equal(r.Busy, []string{key}) {
		t.Errorf("outer Recover = %+v, %v; want the key busy, not posted", r, err)
	}
	if got := p.calls.Load(); got != 1 {
		t.Errorf("two Recover runs posted %d times, want 1", got)
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Ref != "ref-1" {
		t.Errorf("marker: state %s ref %q, want done ref-1", m.State, m.Ref)
	}
}

// A verdict about one claim does not apply to a later one: if, while
// reconcile was asked about claim 1, another run took the marker over and
// that claim 2 was abandoned too, the first run's NotHappened posts nothing.
func seRecoverStaleVerdict(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	const key = "stale-verdict"
	seIntend(t, s, fx, key, "payload")
	seAbandon(t, fx, key)
	clk.Advance(sePastLease)

	notHappened := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.NotHappened, "", nil
	}
	outer := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		done := make(chan struct{})
		go func() { // another run takes over and dies in its post
			defer close(done)
			fx.Recover(ctx, func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
				runtime.Goexit()
				return "", nil
			}, notHappened)
		}()
		<-done
		clk.Advance(sePastLease)
		return sideeffect.NotHappened, "", nil
	}
	var p sePoster
	r, err := fx.Recover(context.Background(), p.post, outer)
	if err != nil || len(r.Posted) != 0 || !slices.Equal(r.Busy, []string{key}) {
		t.Errorf("Recover with a stale verdict = %+v, %v; want the key busy, not posted", r, err)
	}
	if got := p.calls.Load(); got != 0 {
		t.Errorf("a stale verdict posted %d times, want 0", got)
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Unknown || m.Attempts != 2 {
		t.Errorf("marker: state %s attempts %d, want unknown after 2 attempts", m.State, m.Attempts)
	}
}

// Must-show 4: owner A's lease expires, B takes over; A's late complete and
// release fail with ErrFenced and change nothing. A's answer comes either
// after B is done or while B still holds its claim and posts: only the
// claim token tells A's claim from B's then, since the marker is Claimed
// either way.
func seFencing(t *testing.T, h Harness) {
	for _, late := range []struct {
		name    string
		postErr error // what A's post finally returns
	}{
		{"LateComplete", nil},
		{"LateRelease", errors.New("A's post failed")},
	} {
		for _, whileB := range []bool{false, true} {
			name := late.name
			if whileB {
				name += "WhileNewOwnerPosts"
			}
			t.Run(name, func(t *testing.T) { seFencingCase(t, h, late.postErr, whileB) })
		}
	}
}

// seFencingCase runs one fencing case: A claims and posts slowly, its lease
// expires, B's Recover takes the marker over and posts; A's post returns
// postErr after B is done or, with whileB, while B's post is still running.
func seFencingCase(t *testing.T, h Harness, postErr error, whileB bool) {
	s, clk, fx := seNew(t, h)
	const key = "fenced"
	seIntend(t, s, fx, key, "payload")

	type result struct {
		ref string
		err error
	}
	hold := func(started chan<- struct{}, finish <-chan struct{}, ref string, err error) sideeffect.PostFunc {
		return func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			close(started)
			select {
			case <-finish:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return ref, err
		}
	}
	aStarted, aFinish := make(chan struct{}), make(chan struct{})
	bStarted, bFinish := make(chan struct{}), make(chan struct{})
	finishA, finishB := sync.OnceFunc(func() { close(aFinish) }), sync.OnceFunc(func() { close(bFinish) })
	defer finishA() // never leave a post stuck, whatever fails
	defer finishB()

	aDone := make(chan result, 1)
	go func() {
		ref, err := fx.Once(context.Background(), key, hold(aStarted, aFinish, "ref-A", postErr))
		aDone <- result{ref, err}
	}()
	<-aStarted

	clk.Advance(sePastLease)
	postB := hold(bStarted, bFinish, "ref-B", nil)
	if !whileB {
		finishB() // B's post answers at once
	}
	notHappened := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.NotHappened, "", nil
	}
	type report struct {
		r   sideeffect.Report
		err error
	}
	bDone := make(chan report, 1)
	go func() {
		r, err := fx.Recover(context.Background(), postB, notHappened)
		bDone <- report{r, err}
	}()
	<-bStarted
	var b report
	if !whileB {
		b = <-bDone
	}
	before := seGet(t, fx, key)
	if want := map[bool]sideeffect.State{false: sideeffect.Done, true: sideeffect.Claimed}[whileB]; before.State != want || before.Attempts != 2 {
		t.Fatalf("after B's takeover: state %s attempts %d, want %s 2", before.State, before.Attempts, want)
	}

	clk.Advance(time.Second)
	finishA()
	a := <-aDone
	if !errors.Is(a.err, sideeffect.ErrFenced) {
		t.Errorf("A's late outcome: ref %q err %v, want ErrFenced", a.ref, a.err)
	}
	if postErr != nil && !errors.Is(a.err, postErr) {
		t.Errorf("A's late release: err %v does not carry the post's error", a.err)
	}
	if a.ref != "" {
		t.Errorf("A's Once returned ref %q after being fenced", a.ref)
	}
	if after := seGet(t, fx, key); !reflect.DeepEqual(before, after) {
		t.Errorf("A's late outcome changed the marker:\nbefore %+v\nafter  %+v", before, after)
	}

	if whileB {
		finishB()
		b = <-bDone
	}
	if b.err != nil || !slices.Equal(b.r.Posted, []string{key}) {
		t.Errorf("B's Recover = %+v, %v; want the key posted", b.r, b.err)
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Ref != "ref-B" {
		t.Errorf("after B: state %s ref %q, want done ref-B", m.State, m.Ref)
	}
}

// Must-show 5 (store part): a rolled-back transaction leaves no marker and
// runs no after-commit post.
func seRollback(t *testing.T, h Harness) {
	s, _, fx := seNew(t, h)
	const key = "rolled-back"
	errAbort := errors.New("abort the write")
	err := idem.New(s, nil).Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Put(ctx, idem.Key{Collection: "se_posts", ID: "p1"}, map[string]string{"title": "t"}); err != nil {
			return err
		}
		if err := fx.Intend(ctx, tx, key, "payload"); err != nil {
			return err
		}
		if err := fx.PostAfterCommit(ctx, key, seNoPost(t), nil); err != nil {
			return err
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("Run: err %v, want the handler's error", err)
	}
	if _, err := fx.Get(context.Background(), key); !errors.Is(err, sideeffect.ErrNoMarker) || !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after rollback: err %v, want ErrNoMarker", err)
	}
	if _, err := fx.Once(context.Background(), key, seNoPost(t)); !errors.Is(err, sideeffect.ErrNoMarker) {
		t.Errorf("Once after rollback: err %v, want ErrNoMarker", err)
	}
	for _, st := range []sideeffect.State{sideeffect.Pending, sideeffect.Claimed, sideeffect.Unknown} {
		if keys := seListKeys(t, fx, st); len(keys) != 0 {
			t.Errorf("List(%s) after rollback = %v, want none", st, keys)
		}
	}
}

// Must-show 5 (store part): the same keyed write committed twice, each
// intending the effect and posting after commit, posts once; both learn the
// same ref.
func seRepeatedWrite(t *testing.T, h Harness) {
	s, _, fx := seNew(t, h)
	const key = "story-post.my-slug"
	var p sePoster
	write := func() (string, error) {
		var ref string
		var postErr error
		err := idem.New(s, nil).Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, idem.Key{Collection: "se_stories", ID: "my-slug"}, map[string]string{"title": "t"}); err != nil {
				return err
			}
			if err := fx.Intend(ctx, tx, key, map[string]string{"slug": "my-slug"}); err != nil {
				return err
			}
			return fx.PostAfterCommit(ctx, key, p.post, func(r string, err error) { ref, postErr = r, err })
		})
		if err != nil {
			return "", err
		}
		return ref, postErr
	}
	ref1, err1 := write()
	ref2, err2 := write()
	if err1 != nil || err2 != nil || ref1 != "ref-1" || ref2 != "ref-1" {
		t.Errorf("two writes: (%q, %v) and (%q, %v); want ref-1 twice", ref1, err1, ref2, err2)
	}
	if got := p.calls.Load(); got != 1 {
		t.Errorf("the repeated write posted %d times, want 1", got)
	}

	// The same key with another payload is refused and rolls the write back.
	err := idem.New(s, nil).Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, key, map[string]string{"slug": "other"})
	})
	if !errors.Is(err, sideeffect.ErrPayloadMismatch) || !errors.Is(err, idem.ErrExists) {
		t.Errorf("Intend with another payload: err %v, want ErrPayloadMismatch", err)
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Ref != "ref-1" || m.Attempts != 1 {
		t.Errorf("marker: state %s ref %q attempts %d, want done ref-1 1", m.State, m.Ref, m.Attempts)
	}
}

// Recover claims and posts every pending marker once, and they leave the
// index.
func seRecoverPending(t *testing.T, h Harness) {
	s, _, fx := seNew(t, h)
	keys := []string{"pending.a", "pending.b", "pending.c"}
	for _, k := range keys {
		seIntend(t, s, fx, k, k)
	}
	var p sePoster
	noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		t.Errorf("reconcile asked about a pending marker")
		return sideeffect.CannotTell, "", nil
	}
	r, err := fx.Recover(context.Background(), p.post, noReconcile)
	if err != nil || !slices.Equal(r.Posted, keys) {
		t.Fatalf("Recover = %+v, %v; want %v posted", r, err, keys)
	}
	p.mu.Lock()
	posted := slices.Sorted(slices.Values(p.keys))
	p.mu.Unlock()
	if !slices.Equal(posted, keys) {
		t.Errorf("posted %v, want each of %v once", posted, keys)
	}
	for _, k := range keys {
		if m := seGet(t, fx, k); m.State != sideeffect.Done || m.Attempts != 1 {
			t.Errorf("%s: state %s attempts %d, want done 1", k, m.State, m.Attempts)
		}
	}
	if got := seListKeys(t, fx, sideeffect.Pending); len(got) != 0 {
		t.Errorf("List(pending) after Recover = %v, want none", got)
	}
	r, err = fx.Recover(context.Background(), seNoPost(t), noReconcile)
	if err != nil || len(r.Posted)+len(r.Busy)+len(r.Failed)+len(r.Unknown)+len(r.Reconciled) != 0 {
		t.Errorf("second Recover = %+v, %v; want nothing to do", r, err)
	}
}

// Recover and Once racing on one pending marker post it once; Once learns
// the reference whichever of them posted.
func seRecoverRacesOnce(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	const key = "race"
	seIntend(t, s, fx, key, "payload")
	var p sePoster
	slow := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		time.Sleep(10 * time.Millisecond) // let the other find the claim
		return p.post(ctx, key, payload)
	}
	noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		t.Errorf("reconcile asked about a marker that is not abandoned")
		return sideeffect.CannotTell, "", nil
	}
	start := make(chan struct{})
	var (
		wg     sync.WaitGroup
		ref    string
		onceEr error
		r      sideeffect.Report
		recErr error
	)
	wg.Go(func() {
		<-start
		ref, onceEr = seEffects(s, clk, 30*time.Second).Once(context.Background(), key, slow)
	})
	wg.Go(func() {
		<-start
		r, recErr = fx.Recover(context.Background(), slow, noReconcile)
	})
	close(start)
	wg.Wait()
	if got := p.calls.Load(); got != 1 {
		t.Fatalf("Once and Recover posted %d times, want 1", got)
	}
	if onceEr != nil || ref != "ref-1" {
		t.Errorf("Once = %q, %v; want ref-1", ref, onceEr)
	}
	if recErr != nil || len(r.Failed)+len(r.Unknown)+len(r.Reconciled) != 0 || len(r.Posted)+len(r.Busy) > 1 {
		t.Errorf("Recover = %+v, %v; want the key posted, busy or already done", r, recErr)
	}
	if m := seGet(t, fx, key); m.State != sideeffect.Done || m.Ref != "ref-1" || m.Attempts != 1 {
		t.Errorf("marker: state %s ref %q attempts %d, want done ref-1 1", m.State, m.Ref, m.Attempts)
	}
}

// A re-post that Recover makes after reconcile said not committed, and that
// fails, releases the marker to pending for the next run.
func seRecoverRepostFails(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	const key = "repost-fails"
	seIntend(t, s, fx, key, "payload")
	seAbandon(t, fx, key)
	clk.Advance(sePastLease)
	errDown := errors.New("target is down")
	fail := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		return "", errDown
	}
	notHappened := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.NotHappened, "", nil
	}
	r, err := fx.Recover(context.Background(), fail, notHappened)
	if !errors.Is(err, errDown) || !slices.Equal(r.Failed, []string{key}) || len(r.Posted) != 0 {
		t.Fatalf("Recover = %+v, %v; want the key failed with the post's error", r, err)
	}
	m := seGet(t, fx, key)
	if m.State != sideeffect.Pending || m.Attempts != 2 || m.Failures != 1 {
		t.Fatalf("after the failed re-post: state %s attempts %d failures %d, want pending 2 1", m.State, m.Attempts, m.Failures)
	}
	if keys := seListKeys(t, fx, sideeffect.Pending); !slices.Equal(keys, []string{key}) {
		t.Errorf("List(pending) = %v, want [%s]", keys, key)
	}
	var p sePoster
	r, err = fx.Recover(context.Background(), p.post, notHappened)
	if err != nil || !slices.Equal(r.Posted, []string{key}) || p.calls.Load() != 1 {
		t.Errorf("next Recover = %+v, %v, %d posts; want the key posted once", r, err, p.calls.Load())
	}
}

// Intends of different keys from concurrent transactions are all indexed:
// none is lost to another's index write.
func seConcurrentIntend(t *testing.T, h Harness) {
	s, _, fx := seNew(t, h)
	const writers, each = 8, 4
	var want []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		keys := make([]string, each)
		for i := range keys {
			keys[i] = fmt.Sprintf("concurrent-intend.%d.%d", w, i)
		}
		want = append(want, keys...)
		wg.Go(func() {
			<-start
			for _, k := range keys {
				err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
					return fx.Intend(ctx, tx, k, k)
				})
				if err != nil {
					t.Errorf("Intend: %v", err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(want)
	if got := seListKeys(t, fx, sideeffect.Pending); !slices.Equal(got, want) {
		t.Errorf("List(pending) has %d keys, want the %d intended:\n got %v\nwant %v", len(got), len(want), got, want)
	}
}

// Enough markers to fill several index pages in every shard are listed,
// and completing some of them (pages emptying out of order) leaves exactly
// the others listed.
func seManyMarkers(t *testing.T, h Harness) {
	s, _, fx := seNew(t, h)
	const n = 640 // 16 shards, 16 KiB pages: about 33 keys of 490 bytes per page
	perTx := 64
	if h.MaxTransactionItems > 0 {
		// Each Intend also reads and writes its shard's index pages.
		perTx = min(perTx, h.MaxTransactionItems/4)
	}
	pad := strings.Repeat("x", 480)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("many.%04d.%s", i, pad)
	}
	for batch := range slices.Chunk(keys, perTx) {
		err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			for _, k := range batch {
				if err := fx.Intend(ctx, tx, k, "p"); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Intend: %v", err)
		}
	}
	if got := seListKeys(t, fx, sideeffect.Pending); !slices.Equal(got, keys) {
		t.Fatalf("List(pending) has %d keys, want the %d intended, in order", len(got), n)
	}
	var p sePoster
	var left []string
	for i, k := range keys {
		if i%10 != 0 {
			left = append(left, k)
			continue
		}
		if _, err := fx.Once(context.Background(), k, p.post); err != nil {
			t.Fatalf("Once: %v", err)
		}
	}
	if got := seListKeys(t, fx, sideeffect.Pending); !slices.Equal(got, left) {
		t.Errorf("List(pending) after completing every tenth has %d keys, want %d", len(got), len(left))
	}
}

// The index entry of a marker is removed when it is done, once: by Once or
// by Recover with a committed verdict, without touching the entries of other
// markers, and repeating Once or Intend does not put it back.
func seIndexRemovedOnce(t *testing.T, h Harness) {
	s, clk, fx := seNew(t, h)
	keys := []string{"removed.a", "removed.b", "removed.c"}
	for _, k := range keys {
		seIntend(t, s, fx, k, k)
	}
	var p sePoster
	for range 2 {
		if ref, err := fx.Once(context.Background(), keys[0], p.post); err != nil || ref != "ref-1" {
			t.Fatalf("Once = %q, %v; want ref-1", ref, err)
		}
	}
	seIntend(t, s, fx, keys[0], keys[0])
	if got := seListKeys(t, fx, sideeffect.Pending); !slices.Equal(got, keys[1:]) {
		t.Fatalf("List(pending) after Once = %v, want %v", got, keys[1:])
	}

	seAbandon(t, fx, keys[1])
	clk.Advance(sePastLease)
	committed := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		if m.Key != keys[1] {
			t.Errorf("reconcile asked about %s", m.Key)
		}
		return sideeffect.Happened, "ref-reconciled", nil
	}
	r, err := fx.Recover(context.Background(), p.post, committed)
	if err != nil || !slices.Equal(r.Reconciled, keys[1:2]) || !slices.Equal(r.Posted, keys[2:]) {
		t.Fatalf("Recover = %+v, %v; want %s reconciled and %s posted", r, err, keys[1], keys[2])
	}
	seIntend(t, s, fx, keys[1], keys[1])
	for _, st := range []sideeffect.State{sideeffect.Pending, sideeffect.Claimed, sideeffect.Unknown} {
		if got := seListKeys(t, fx, st); len(got) != 0 {
			t.Errorf("List(%s) after all done = %v, want none", st, got)
		}
	}
	if m := seGet(t, fx, keys[1]); m.State != sideeffect.Done || m.Ref != "ref-reconciled" {
		t.Errorf("reconciled marker: state %s ref %q, want done ref-reconciled", m.State, m.Ref)
	}
	if got := p.calls.Load(); got != 2 {
		t.Errorf("posted %d times, want 2 (the first and the third key)", got)
	}
}
