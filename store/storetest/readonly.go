package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// readOnlyWait bounds how long a read-only transaction may take while a
// write transaction is held open: it waits for none, so it takes
// milliseconds; one that waited would wait until the writer is released.
const readOnlyWait = 5 * time.Second

// runReadOnly checks the optional ReadOnlyRunner capability: a read-only
// transaction reads committed documents, refuses writes, reads one
// snapshot, and does not wait for a write transaction held open.
func runReadOnly(t *testing.T, h Harness) {
	cases := []struct {
		name string
		test func(t *testing.T, c *contract, ro backend.ReadOnlyRunner)
	}{
		{"ReadsCommitted", readOnlyReadsCommitted},
		{"WritesRefused", readOnlyWritesRefused},
		{"OneSnapshot", readOnlyOneSnapshot},
		{"WhileAWriteIsHeld", readOnlyWhileAWriteIsHeld},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !h.ReadOnlyRunner {
				t.Skip("the harness declares no backend.ReadOnlyRunner")
			}
			c := newContract(t, h)
			tc.test(t, c, capability[backend.ReadOnlyRunner](t, c.s))
		})
	}
}

// readOnly runs fn in a read-only transaction and fails the test if it
// fails.
func readOnly(t *testing.T, ro backend.ReadOnlyRunner, fn func(ctx context.Context, tx idem.Tx) error) {
	t.Helper()
	if err := ro.RunReadOnly(t.Context(), fn); err != nil {
		t.Fatalf("RunReadOnly: %v", err)
	}
}

func readOnlyReadsCommitted(t *testing.T, c *contract, ro backend.ReadOnlyRunner) {
	k, soon := ckey("ro-doc"), ckey("ro-expiring")
	var want idem.Version
	c.run(func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, k, contractDoc{N: 1}); err != nil {
			return err
		}
		if err := tx.Create(ctx, soon, contractDoc{N: 2}, backend.WithExpiry(c.clock.Now().Add(time.Minute))); err != nil {
			return err
		}
		var err error
		want, err = tx.Get(ctx, k, nil)
		return err
	})
	readOnly(t, ro, func(ctx context.Context, tx idem.Tx) error {
		var d contractDoc
		if v, err := tx.Get(ctx, k, &d); err != nil || d.N != 1 || v != want {
			return fmt.Errorf("Get = %+v at version %d, %v; want N=1 at %d", d, v, err, want)
		}
		if _, err := tx.Get(ctx, soon, nil); err != nil {
			return fmt.Errorf("Get of a live document: %v", err)
		}
		if _, err := tx.Get(ctx, ckey("ro-absent"), nil); !errors.Is(err, idem.ErrNotFound) {
			return fmt.Errorf("Get of an absent document: %v, want ErrNotFound", err)
		}
		if _, err := tx.Get(ctx, idem.Key{Collection: "Bad/", ID: "x"}, nil); !errors.Is(err, backend.ErrInvalidKey) {
			return fmt.Errorf("Get of an invalid key: %v, want ErrInvalidKey", err)
		}
		return nil
	})
	c.clock.Advance(time.Minute)
	readOnly(t, ro, func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, soon, nil); !errors.Is(err, idem.ErrNotFound) {
			return fmt.Errorf("Get of an expired document: %v, want ErrNotFound", err)
		}
		return nil
	})
	errFn := errors.New("storetest: fn's own error")
	if err := ro.RunReadOnly(t.Context(), func(context.Context, idem.Tx) error { return errFn }); !errors.Is(err, errFn) {
		t.Errorf("RunReadOnly = %v, want fn's error", err)
	}
}

func readOnlyWritesRefused(t *testing.T, c *contract, ro backend.ReadOnlyRunner) {
	k, fresh := ckey("ro-doc"), ckey("ro-fresh")
	var v idem.Version
	c.run(func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, k, contractDoc{N: 1}); err != nil {
			return err
		}
		var err error
		v, err = tx.Get(ctx, k, nil)
		return err
	})
	readOnly(t, ro, func(ctx context.Context, tx idem.Tx) error {
		for name, write := range map[string]func() error{
			"Create":                     func() error { return tx.Create(ctx, fresh, contractDoc{N: 2}) },
			"Create with CreateAtCommit": func() error { return tx.Create(ctx, fresh, contractDoc{N: 2}, backend.CreateAtCommit()) },
			"Put":                        func() error { return tx.Put(ctx, k, contractDoc{N: 2}) },
			"Update":                     func() error { return tx.Update(ctx, k, v, contractDoc{N: 2}) },
			"Delete":                     func() error { return tx.Delete(ctx, k, 0) },
		} {
			if err := write(); !errors.Is(err, backend.ErrReadOnly) {
				t.Errorf("%s in a read-only transaction: %v, want an error wrapping ErrReadOnly", name, err)
			}
		}
		// The transaction goes on.
		var d contractDoc
		if got, err := tx.Get(ctx, k, &d); err != nil || d.N != 1 || got != v {
			return fmt.Errorf("Get after the refused writes = %+v at %d, %v; want N=1 at %d", d, got, err, v)
		}
		return nil
	})
	if d, got, err := c.get(k); err != nil || d.N != 1 || got != v {
		t.Errorf("after a read-only transaction's writes: %+v at %d, %v; want N=1 at %d, unchanged", d, got, err, v)
	}
	if _, _, err := c.get(fresh); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("a read-only transaction's Create was kept: %v", err)
	}
}

// readOnlyOneSnapshot commits a change to two documents between the reads
// of one read-only transaction: fn's last run must see both before the
// change or both after it (a store that checks its reads when fn returns
// runs it again).
func readOnlyOneSnapshot(t *testing.T, c *contract, ro backend.ReadOnlyRunner) {
	a, b := ckey("ro-a"), ckey("ro-b")
	c.run(func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, a, contractDoc{N: 1}); err != nil {
			return err
		}
		return tx.Create(ctx, b, contractDoc{N: 1})
	})
	attempts := 0
	var da, db contractDoc
	readOnly(t, ro, func(ctx context.Context, tx idem.Tx) error {
		attempts++
		da, db = contractDoc{}, contractDoc{}
		if _, err := tx.Get(ctx, a, &da); err != nil {
			return err
		}
		if attempts == 1 {
			// Another transaction changes both, and commits.
			err := c.s.Run(ctx, func(ctx context.Context, w idem.Tx) error {
				if err := w.Put(ctx, a, contractDoc{N: 2}); err != nil {
					return err
				}
				return w.Put(ctx, b, contractDoc{N: 2})
			})
			if err != nil {
				return fmt.Errorf("a write during a read-only transaction: %w", err)
			}
		}
		_, err := tx.Get(ctx, b, &db)
		return err
	})
	if da.N != db.N {
		t.Errorf("one read-only transaction read a at N=%d and b at N=%d (after %d runs of fn): not one snapshot", da.N, db.N, attempts)
	}
}

// readOnlyWhileAWriteIsHeld holds a write transaction open, after it has
// written a document, and runs a read-only transaction meanwhile: it must
// end within readOnlyWait, and see the document as committed before.
func readOnlyWhileAWriteIsHeld(t *testing.T, c *contract, ro backend.ReadOnlyRunner) {
	k := ckey("ro-held")
	var v idem.Version
	c.run(func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, k, contractDoc{N: 1}); err != nil {
			return err
		}
		var err error
		v, err = tx.Get(ctx, k, nil)
		return err
	})
	held, release, written := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		once := false
		written <- c.s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			// An Update goes out at once, and holds the row where a
			// database locks rows.
			if err := tx.Update(ctx, k, v, contractDoc{N: 2}); err != nil {
				return err
			}
			if !once {
				once = true
				close(held)
			}
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			return nil
		})
	}()
	var read chan error // the read-only transaction's result, once it runs
	defer func() {
		close(release)
		select {
		case err := <-written:
			if err != nil {
				t.Errorf("the held write: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the held write did not end a minute after its release")
		}
		if read == nil {
			return
		}
		select {
		case <-read:
		case <-time.After(time.Minute):
			t.Error("the read-only transaction did not end a minute after the write's release")
		}
	}()
	select {
	case <-held:
	case err := <-written:
		t.Fatalf("the write ended before it was held: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write transaction did not start within 30 s")
	}

	start := time.Now()
	ended := make(chan error, 1)
	var d contractDoc
	go func() {
		ended <- ro.RunReadOnly(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			d = contractDoc{}
			_, err := tx.Get(ctx, k, &d)
			return err
		})
	}()
	select {
	case err := <-ended:
		if err != nil || d.N != 1 {
			t.Errorf("a read-only transaction while a write is held: %+v, %v; want N=1, the committed document", d, err)
		}
		t.Logf("a read-only transaction while a write transaction is held open took %v", time.Since(start))
	case <-time.After(readOnlyWait):
		t.Errorf("a read-only transaction did not end within %v while a write transaction was held open: it waits for writers", readOnlyWait)
		read = ended // the deferred function waits for it after the release
	}
}
