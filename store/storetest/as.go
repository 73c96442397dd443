package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/idemkit/sdk/idem"
)

// runAs checks Tx.As: it hands out the native handles the harness lists
// and refuses every other target, and what fn writes through a native
// handle commits and rolls back with the Tx.
func runAs(t *testing.T, h Harness) {
	t.Run("Targets", func(t *testing.T) { t.Parallel(); testAsTargets(t, h) })
	t.Run("WritesCommitWithTx", func(t *testing.T) { t.Parallel(); testAsWrites(t, h) })
}

// notNative is a type no store hands out.
type notNative struct{}

func testAsTargets(t *testing.T, h Harness) {
	c := newContract(t, h)
	k := ckey("as")
	c.run(func(ctx context.Context, tx idem.Tx) error {
		// A Tx write first: some stores read for it, and take no reads
		// after their native handle has written.
		if err := tx.Put(ctx, k, contractDoc{N: 1}); err != nil {
			return err
		}
		for _, target := range h.As {
			typ := reflect.TypeOf(target)
			if typ == nil || typ.Kind() != reflect.Pointer {
				t.Fatalf("storetest: Harness.As holds %T, want a pointer to a variable of a native type", target)
			}
			p := reflect.New(typ.Elem())
			switch {
			case !tx.As(p.Interface()):
				t.Errorf("As(%s) = false, and the harness lists it", typ)
			case p.Elem().IsZero():
				t.Errorf("As(%s) = true and left its target zero", typ)
			}
		}
		for _, other := range []any{nil, notNative{}, new(notNative), new(*notNative)} {
			if tx.As(other) {
				t.Errorf("As(%T) = true; a store hands out only its native handles", other)
			}
		}
		return nil
	})
	if d, _ := c.mustGet(k); d.N != 1 {
		t.Fatalf("Get after a transaction that handed out its handles = %+v, want N=1", d)
	}
}

func testAsWrites(t *testing.T, h Harness) {
	if h.AsWrite == nil {
		if len(h.As) > 0 {
			t.Fatal("the harness lists native handles: set AsWrite and AsRead, so that the suite checks what is written through them")
		}
		t.Skip("the harness lists no native handle")
	}
	c := newContract(t, h)
	// The harness's storage may outlive this store and be shared by other
	// subtests: ids of this run's own.
	prefix := rand.Text()[:12]
	id := func(name string) string { return prefix + "-" + name }
	write := func(ctx context.Context, tx idem.Tx, name string) error {
		if err := tx.Create(ctx, ckey(name), contractDoc{N: 1}); err != nil {
			return err
		}
		if err := h.AsWrite(ctx, tx, id(name)); err != nil {
			return fmt.Errorf("AsWrite: %w", err)
		}
		return nil
	}

	errFn := errors.New("fn failed after its writes")
	err := c.s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if err := write(ctx, tx, "failed"); err != nil {
			return err
		}
		return errFn
	})
	wantErr(t, "Run whose fn fails", err, errFn)
	c.mustAbsent(ckey("failed"))
	c.wantNative(h, id("failed"), false)

	c.run(func(ctx context.Context, tx idem.Tx) error { return write(ctx, tx, "kept") })
	c.mustGet(ckey("kept"))
	c.wantNative(h, id("kept"), true)

	// An attempt that lost a race keeps nothing, not even its native
	// write; the next one keeps its own.
	attempts := 0
	c.run(func(ctx context.Context, tx idem.Tx) error {
		attempts++
		if err := write(ctx, tx, fmt.Sprintf("attempt%d", attempts)); err != nil {
			return err
		}
		if attempts == 1 {
			return fmt.Errorf("lost a race: %w", idem.ErrConflict)
		}
		return nil
	})
	if attempts != 2 {
		t.Fatalf("fn ran %d times, want 2", attempts)
	}
	c.mustAbsent(ckey("attempt1"))
	c.wantNative(h, id("attempt1"), false)
	c.mustGet(ckey("attempt2"))
	c.wantNative(h, id("attempt2"), true)
}

// wantNative fails the test unless AsRead finds the record id exactly when
// want.
func (c *contract) wantNative(h Harness, id string, want bool) {
	c.t.Helper()
	var got bool
	c.run(func(ctx context.Context, tx idem.Tx) error {
		var err error
		got, err = h.AsRead(ctx, tx, id)
		return err
	})
	if got != want {
		c.t.Fatalf("AsRead(%s) = %v, want %v", id, got, want)
	}
}
