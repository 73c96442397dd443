package merge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/store/memory"
)

// read returns the stored session and its version.
func read(t *testing.T, s idem.Store, k idem.Key) (Session, idem.Version) {
	t.Helper()
	var got Session
	var v idem.Version
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		v, err = tx.Get(ctx, k, &got)
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", k, err)
	}
	return got, v
}

func apply(s idem.Store, in Session, opts *merge.Options[Session]) (merge.Change[Session], error) {
	var ch merge.Change[Session]
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		ch, err = merge.Apply(ctx, tx, sessionKey, in, stopRule, opts)
		return err
	})
	return ch, err
}

func TestApplyCreatesAbsentRecord(t *testing.T) {
	s := memory.New(nil)
	// Not its own view: Apply stores rule(in, in), which is.
	in := Session{ID: "s1", Start: running.Start, Stops: phoneStop.Stops}
	ch, err := apply(s, in, &merge.Options[Session]{Describe: func(before, after Session) string { return "described" }})
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Created || !ch.Changed || ch.Summary != "created" || ch.After.End == nil {
		t.Errorf("change %+v", ch)
	}
	got, _ := read(t, s, sessionKey)
	if got.End == nil || !got.End.Equal(at(14, 5)) || len(got.Stops) != 1 {
		t.Errorf("stored %+v", got)
	}
}

func TestApplyUnchangedDoesNotWrite(t *testing.T) {
	s := memory.New(nil)
	if _, err := apply(s, phoneStop, nil); err != nil {
		t.Fatal(err)
	}
	_, v1 := read(t, s, sessionKey)
	described := false
	ch, err := apply(s, phoneStop, &merge.Options[Session]{Describe: func(before, after Session) string { described = true; return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Changed || ch.Created || ch.Summary != "unchanged" || described {
		t.Errorf("change %+v (describe called: %v)", ch, described)
	}
	if _, v2 := read(t, s, sessionKey); v2 != v1 {
		t.Errorf("an unchanged merge wrote: version %d -> %d", v1, v2)
	}
}

func TestApplyDefaultSummaryNamesFields(t *testing.T) {
	s := memory.New(nil)
	if _, err := apply(s, laptopStop, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := apply(s, phoneStop, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The laptop's "done" outcome stays, so outcome is not listed.
	if want := "changed: end, notes, stops, summary"; ch.Summary != want {
		t.Errorf("summary %q, want %q", ch.Summary, want)
	}
}

func TestApplyWriteOptions(t *testing.T) {
	clock := time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC)
	s := memory.New(&memory.Options{Now: func() time.Time { return clock }})
	exp := &merge.Options[Session]{ExpiresAt: clock.Add(time.Hour)}
	if _, err := apply(s, laptopStop, exp); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(s, phoneStop, exp); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Hour)
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, sessionKey, nil)
		return err
	})
	if !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("merged record past its expiry: Get = %v, want ErrNotFound", err)
	}
}

// racyTx runs interfere once, right after the first Get, as if another
// transaction committed between this one's read and its write.
type racyTx struct {
	idem.Tx
	interfere func()
}

func (r *racyTx) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	v, err := r.Tx.Get(ctx, k, dst)
	if f := r.interfere; f != nil {
		r.interfere = nil
		f()
	}
	return v, err
}

// TestApplyWriteIsConditional: a merge whose read went stale must not
// overwrite the newer record (that would lose the other attempt); Apply
// reports ErrConflict, and the retry keeps both.
func TestApplyWriteIsConditional(t *testing.T) {
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			ctx := context.Background()
			s := memory.New(nil)
			if existing {
				if _, err := apply(s, watchStop, nil); err != nil {
					t.Fatal(err)
				}
			}
			interfere := func() {
				if _, err := apply(s, laptopStop, nil); err != nil {
					t.Errorf("concurrent apply: %v", err)
				}
			}
			var firstErr error
			attempts := 0
			err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				attempts++
				rtx := &racyTx{Tx: tx}
				if attempts == 1 {
					rtx.interfere = interfere
				}
				_, err := merge.Apply(ctx, rtx, sessionKey, phoneStop, stopRule, nil)
				if attempts == 1 {
					firstErr = err
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(firstErr, idem.ErrConflict) {
				t.Errorf("Apply on a stale read = %v, want ErrConflict", firstErr)
			}
			got, _ := read(t, s, sessionKey)
			want := 2
			if existing {
				want = 3
			}
			if len(got.Stops) != want {
				t.Errorf("stored %d stops, want %d: %+v", len(got.Stops), want, got.Stops)
			}
		})
	}
}

func TestApplyConcurrentLosesNothing(t *testing.T) {
	s := memory.New(nil)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := fmt.Sprintf("op-%02d", i)
			_, err := apply(s, stopRequest(running, op, Stop{At: at(14, i), Outcome: "done", Summary: op}), nil)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := read(t, s, sessionKey)
	for i := range n {
		if _, ok := got.Stops[fmt.Sprintf("op-%02d", i)]; !ok {
			t.Errorf("attempt op-%02d lost", i)
		}
	}
	if got.End == nil || !got.End.Equal(at(14, 0)) || got.Summary != "op-00" || len(got.Notes) != n-1 {
		t.Errorf("view of the merged session: end %v summary %q notes %d", got.End, got.Summary, len(got.Notes))
	}
}

func TestApplyBadInputChangesNothing(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	if _, err := apply(s, phoneStop, nil); err != nil {
		t.Fatal(err)
	}
	_, v := read(t, s, sessionKey)
	other := idem.Key{Collection: "sessions", ID: "not-a-session"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, other, []int{1, 2})
	}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		fn   func(ctx context.Context, tx idem.Tx) error
		is   error
	}{
		{"nil tx", func(ctx context.Context, _ idem.Tx) error {
			_, err := merge.Apply(ctx, nil, sessionKey, laptopStop, stopRule, nil)
			return err
		}, nil},
		{"nil rule", func(ctx context.Context, tx idem.Tx) error {
			_, err := merge.Apply(ctx, tx, sessionKey, laptopStop, nil, nil)
			return err
		}, nil},
		{"invalid key", func(ctx context.Context, tx idem.Tx) error {
			_, err := merge.Apply(ctx, tx, idem.Key{Collection: "Sessions!", ID: "s1"}, laptopStop, stopRule, nil)
			return err
		}, backend.ErrInvalidKey},
		{"record of another type", func(ctx context.Context, tx idem.Tx) error {
			_, err := merge.Apply(ctx, tx, other, laptopStop, stopRule, nil)
			return err
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Run(ctx, c.fn)
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Errorf("err = %v, want an error (wrapping %v)", err, c.is)
			}
		})
	}
	if _, v2 := read(t, s, sessionKey); v2 != v {
		t.Errorf("bad input wrote the session: version %d -> %d", v, v2)
	}
	var raw json.RawMessage
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, other, &raw)
		return err
	}); err != nil || string(raw) != "[1,2]" {
		t.Errorf("other record now %s (%v)", raw, err)
	}
}
