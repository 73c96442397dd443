package sideeffect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/sideeffect"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/storetest"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newStore returns a memory store on a test clock and the tests' Effects
// over it (see effects).
func newStore(t *testing.T) (*memory.Store, *storetest.Clock, *sideeffect.Effects) {
	clk := storetest.NewClock(epoch)
	s := memory.New(&memory.Options{Now: clk.Now})
	return s, clk, effects(s, clk, sideeffect.Options{})
}

// effects returns the Effects over s the tests use: the test clock and a
// one-minute lease, unless o sets them.
func effects(s idem.Store, clk *storetest.Clock, o sideeffect.Options) *sideeffect.Effects {
	if o.Clock == nil {
		o.Clock = clk.Now
	}
	if o.Lease == 0 {
		o.Lease = time.Minute
	}
	return sideeffect.New(s, &o)
}

// intend commits a marker for key in a transaction of its own on s.
func intend(t *testing.T, s idem.Store, fx *sideeffect.Effects, key string, payload any) {
	t.Helper()
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, key, payload)
	})
	if err != nil {
		t.Fatalf("Intend: %v", err)
	}
}

func get(t *testing.T, fx *sideeffect.Effects, key string) sideeffect.Marker {
	t.Helper()
	m, err := fx.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return m
}

type counter struct{ n atomic.Int64 }

func (c *counter) post(ctx context.Context, key string, payload json.RawMessage) (string, error) {
	return fmt.Sprintf("ref-%d", c.n.Add(1)), nil
}

func mustNotPost(t *testing.T) sideeffect.PostFunc {
	return func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		t.Error("post called")
		return "", errors.New("must not post")
	}
}

func listKeys(t *testing.T, fx *sideeffect.Effects, st sideeffect.State) []string {
	t.Helper()
	ms, err := fx.List(context.Background(), st)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key)
	}
	return keys
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	s, _, fx := newStore(t)
	ctx := context.Background()
	secret := "secret-value"
	badKeys := map[string]string{
		"empty":     "",
		"slash":     secret + "/x",
		"control":   secret + "\n",
		"too long":  secret + strings.Repeat("k", 600),
		"bad utf-8": secret + "\xff",
	}
	noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.CannotTell, "", nil
	}
	for name, key := range badKeys {
		t.Run(name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, backend.ErrInvalidKey) {
					t.Errorf("%s: err %v, want ErrInvalidKey", what, err)
				} else if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: error message echoes the key: %v", what, err)
				}
			}
			check("Intend", s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				return fx.Intend(ctx, tx, key, "p")
			}))
			_, err := fx.Once(ctx, key, mustNotPost(t))
			check("Once", err)
			_, err = fx.Get(ctx, key)
			check("Get", err)
			check("PostAfterCommit", idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				return fx.PostAfterCommit(ctx, key, mustNotPost(t), nil)
			}))
		})
	}

	intend(t, s, fx, "ok", "p")
	cases := []struct {
		name string
		run  func() error
	}{
		{"Once nil post", func() error { _, err := fx.Once(ctx, "ok", nil); return err }},
		{"Recover nil post", func() error { _, err := fx.Recover(ctx, nil, noReconcile); return err }},
		{"Recover nil reconcile", func() error { _, err := fx.Recover(ctx, mustNotPost(t), nil); return err }},
		{"List done", func() error { _, err := fx.List(ctx, sideeffect.Done); return err }},
		{"List bogus state", func() error { _, err := fx.List(ctx, "bogus"); return err }},
		{"Intend unencodable payload", func() error {
			return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				return fx.Intend(ctx, tx, "other", make(chan int))
			})
		}},
		{"PostAfterCommit outside a transaction", func() error {
			return fx.PostAfterCommit(ctx, "ok", mustNotPost(t), nil)
		}},
	}
	for _, tc := range cases {
		if err := tc.run(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if err := fx.PostAfterCommit(ctx, "ok", mustNotPost(t), nil); !errors.Is(err, sideeffect.ErrNoTransaction) {
		t.Errorf("PostAfterCommit outside a transaction: err %v, want sideeffect.ErrNoTransaction", err)
	}
	if m := get(t, fx, "ok"); m.State != sideeffect.Pending || m.Attempts != 0 {
		t.Errorf("marker after refused calls: %+v, want untouched pending", m)
	}
	if keys := listKeys(t, fx, sideeffect.Pending); !slices.Equal(keys, []string{"ok"}) {
		t.Errorf("pending markers = %v, want only [ok]", keys)
	}
}

func TestIntendIsIdempotent(t *testing.T) {
	s, clk, fx := newStore(t)
	payload := map[string]any{"text": "hello", "n": 1}
	intend(t, s, fx, "k", payload)
	first := get(t, fx, "k")
	clk.Advance(time.Second)
	intend(t, s, fx, "k", map[string]any{"n": 1, "text": "hello"})
	if again := get(t, fx, "k"); !again.UpdatedAt.Equal(first.UpdatedAt) || again.State != sideeffect.Pending {
		t.Errorf("a repeated Intend changed the marker: %+v -> %+v", first, again)
	}
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, "k", map[string]any{"text": "bye"})
	})
	if !errors.Is(err, sideeffect.ErrPayloadMismatch) {
		t.Errorf("Intend with another payload: err %v, want ErrPayloadMismatch", err)
	}
	var got map[string]any
	if err := json.Unmarshal(first.Payload, &got); err != nil || got["text"] != "hello" {
		t.Errorf("stored payload %s, %v", first.Payload, err)
	}
}

func TestPostWithUnknownOutcomeWaitsForReconcile(t *testing.T) {
	for name, post := range map[string]sideeffect.PostFunc{
		"ErrUnknownOutcome": func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			return "", fmt.Errorf("timeout after send: %w", idem.ErrUnknownOutcome)
		},
		"panic": func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			panic("boom")
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, _, fx := newStore(t)
			intend(t, s, fx, "k", "p")
			_, err := fx.Once(context.Background(), "k", post)
			if !errors.Is(err, sideeffect.ErrUnknown) {
				t.Fatalf("Once: err %v, want ErrUnknown", err)
			}
			if keys := listKeys(t, fx, sideeffect.Unknown); !slices.Equal(keys, []string{"k"}) {
				t.Fatalf("unknown markers = %v, want [k]", keys)
			}
			if _, err := fx.Once(context.Background(), "k", mustNotPost(t)); !errors.Is(err, sideeffect.ErrUnknown) {
				t.Errorf("second Once: err %v, want ErrUnknown", err)
			}
			committed := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
				return sideeffect.Happened, "found", nil
			}
			r, err := fx.Recover(context.Background(), mustNotPost(t), committed)
			if err != nil || !slices.Equal(r.Reconciled, []string{"k"}) {
				t.Errorf("Recover = %+v, %v; want k reconciled", r, err)
			}
			if m := get(t, fx, "k"); m.State != sideeffect.Done || m.Ref != "found" {
				t.Errorf("marker %+v, want done found", m)
			}
		})
	}
}

func TestRecoverDrivesPendingMarkers(t *testing.T) {
	s, _, fx := newStore(t)
	// More markers than one read batch, spread over the index shards.
	var want []string
	for i := range 60 {
		key := fmt.Sprintf("m%02d", i)
		want = append(want, key)
		intend(t, s, fx, key, i)
	}
	if keys := listKeys(t, fx, sideeffect.Pending); !slices.Equal(keys, want) {
		t.Fatalf("pending = %v, want %v", keys, want)
	}
	errDown := errors.New("down")
	var posted counter
	post := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		if key == "m07" {
			return "", errDown
		}
		return posted.post(ctx, key, payload)
	}
	noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		t.Error("reconcile asked about a pending marker")
		return sideeffect.CannotTell, "", nil
	}
	r, err := fx.Recover(context.Background(), post, noReconcile)
	if !errors.Is(err, errDown) {
		t.Errorf("Recover err %v, want the failed post's error", err)
	}
	if len(r.Posted) != 59 || !slices.Equal(r.Failed, []string{"m07"}) || posted.n.Load() != 59 {
		t.Errorf("Recover posted %d (%d calls), failed %v; want 59 and [m07]", len(r.Posted), posted.n.Load(), r.Failed)
	}
	if keys := listKeys(t, fx, sideeffect.Pending); !slices.Equal(keys, []string{"m07"}) {
		t.Errorf("pending after Recover = %v, want [m07]", keys)
	}
	if m := get(t, fx, "m07"); m.Failures != 1 {
		t.Errorf("m07 failures %d, want 1", m.Failures)
	}
	r, err = fx.Recover(context.Background(), posted.post, noReconcile)
	if err != nil || !slices.Equal(r.Posted, []string{"m07"}) || posted.n.Load() != 60 {
		t.Errorf("second Recover = %+v, %v; want only m07 posted", r, err)
	}
}

func TestRecoverReconcileFailures(t *testing.T) {
	errLookup := errors.New("lookup failed")
	for name, rec := range map[string]sideeffect.ReconcileFunc{
		"error": func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
			return sideeffect.NotHappened, "", errLookup
		},
		"undefined outcome": func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
			return sideeffect.Outcome(42), "", nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, _, fx := newStore(t)
			intend(t, s, fx, "k", "p")
			unknown := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
				return "", idem.ErrUnknownOutcome
			}
			fx.Once(context.Background(), "k", unknown)
			r, err := fx.Recover(context.Background(), mustNotPost(t), rec)
			if err == nil || !slices.Equal(r.Failed, []string{"k"}) {
				t.Errorf("Recover = %+v, %v; want k failed with an error", r, err)
			}
			if m := get(t, fx, "k"); m.State != sideeffect.Unknown {
				t.Errorf("marker state %s, want unknown", m.State)
			}
		})
	}
}

// A caller waiting on another's claim posts itself if that claim is
// released, and learns the ref if it completes; with too short a wait it
// gets ErrInFlight, and with a negative one it gets it without waiting.
func TestOnceWaitsForOtherClaim(t *testing.T) {
	t.Run("released", func(t *testing.T) {
		s, clk, fx := newStore(t)
		intend(t, s, fx, "k", "p")
		waiting := effects(s, clk, sideeffect.Options{Wait: 10 * time.Second})
		var waiter counter
		var ref string
		var werr error
		done := make(chan struct{})
		fail := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			go func() {
				defer close(done)
				ref, werr = waiting.Once(context.Background(), key, waiter.post)
			}()
			time.Sleep(30 * time.Millisecond) // the waiter is polling
			select {
			case <-done:
				t.Error("the waiter returned while the marker was claimed")
			default:
			}
			return "", errors.New("failed")
		}
		if _, err := fx.Once(context.Background(), "k", fail); err == nil {
			t.Error("Once with a failing post returned no error")
		}
		<-done
		if werr != nil || ref != "ref-1" || waiter.n.Load() != 1 {
			t.Errorf("waiter = %q, %v after %d posts; want ref-1 after 1", ref, werr, waiter.n.Load())
		}
		if m := get(t, fx, "k"); m.State != sideeffect.Done || m.Attempts != 2 || m.Failures != 1 {
			t.Errorf("marker %+v, want done after 2 attempts, 1 failure", m)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s, clk, fx := newStore(t)
		intend(t, s, fx, "k", "p")
		var inner error
		var elapsed time.Duration
		hold := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			start := time.Now()
			_, inner = effects(s, clk, sideeffect.Options{Wait: 50 * time.Millisecond}).Once(ctx, key, mustNotPost(t))
			elapsed = time.Since(start)
			return "r", nil
		}
		if _, err := fx.Once(context.Background(), "k", hold); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(inner, sideeffect.ErrInFlight) || elapsed < 50*time.Millisecond {
			t.Errorf("waiter: err %v after %v, want ErrInFlight after the wait", inner, elapsed)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s, clk, fx := newStore(t)
		intend(t, s, fx, "k", "p")
		var inner error
		hold := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			_, inner = effects(s, clk, sideeffect.Options{Wait: time.Minute}).Once(cctx, key, mustNotPost(t))
			return "r", nil
		}
		if _, err := fx.Once(context.Background(), "k", hold); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(inner, context.DeadlineExceeded) {
			t.Errorf("waiter: err %v, want its context's error", inner)
		}
	})
	// The waiter's context ends long before the default wait would: a
	// waiter that waits reports the context's error, one that does not
	// reports ErrInFlight.
	for _, tc := range []struct {
		name string
		wait time.Duration
		want error
	}{
		{"negative wait does not wait", -1, sideeffect.ErrInFlight},
		{"zero wait is the default", 0, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk, fx := newStore(t)
			intend(t, s, fx, "k", "p")
			var inner error
			hold := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, inner = effects(s, clk, sideeffect.Options{Wait: tc.wait}).Once(cctx, key, mustNotPost(t))
				return "r", nil
			}
			if _, err := fx.Once(context.Background(), "k", hold); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(inner, tc.want) {
				t.Errorf("waiter: err %v, want %v", inner, tc.want)
			}
		})
	}
}

// The post runs under the lease as a deadline, and its outcome is recorded
// even when the caller's context is cancelled during the post.
func TestOncePostContext(t *testing.T) {
	s, clk, fx := newStore(t)
	intend(t, s, fx, "k", "p")
	ctx, cancel := context.WithCancel(context.Background())
	post := func(pctx context.Context, key string, payload json.RawMessage) (string, error) {
		dl, ok := pctx.Deadline()
		if !ok || time.Until(dl) > 30*time.Second {
			t.Errorf("post context deadline %v (set %v), want within the 30s lease", dl, ok)
		}
		cancel()
		return "r", nil
	}
	ref, err := effects(s, clk, sideeffect.Options{Lease: 30 * time.Second}).Once(ctx, "k", post)
	if err != nil || ref != "r" {
		t.Fatalf("Once = %q, %v; want r", ref, err)
	}
	if m := get(t, fx, "k"); m.State != sideeffect.Done || m.Ref != "r" {
		t.Errorf("marker %+v, want done r", m)
	}
}

// A late complete by an owner whose lease expired, when nobody took over,
// still records the outcome it knows.
func TestLateCompleteWithoutTakeover(t *testing.T) {
	s, clk, fx := newStore(t)
	intend(t, s, fx, "k", "p")
	var listed []string
	post := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		clk.Advance(2 * time.Minute)
		cannotTell := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
			return sideeffect.CannotTell, "", nil
		}
		if _, err := fx.Recover(ctx, mustNotPost(t), cannotTell); err != nil {
			t.Errorf("Recover: %v", err)
		}
		listed = listKeys(t, fx, sideeffect.Unknown)
		return "late", nil
	}
	ref, err := fx.Once(context.Background(), "k", post)
	if err != nil || ref != "late" {
		t.Fatalf("Once = %q, %v; want late", ref, err)
	}
	if !slices.Equal(listed, []string{"k"}) {
		t.Errorf("unknown during the post = %v, want [k]", listed)
	}
	if m := get(t, fx, "k"); m.State != sideeffect.Done || m.Ref != "late" {
		t.Errorf("marker %+v, want done late", m)
	}
	if keys := listKeys(t, fx, sideeffect.Unknown); len(keys) != 0 {
		t.Errorf("unknown after the late complete = %v, want none", keys)
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[sideeffect.Outcome]string{
		sideeffect.CannotTell:  "cannot_tell",
		sideeffect.Happened:    "happened",
		sideeffect.NotHappened: "not_happened",
		sideeffect.Outcome(9):  "Outcome(9)",
	} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}
