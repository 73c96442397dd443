package memory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// A transaction keeps its first few reads and writes in itself and indexes
// them past eight keys: with 20 keys, its own writes are seen, a key
// written again keeps one write (the last), and a delete after a create
// leaves nothing.
func TestTransactionOfManyKeys(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	key := func(i int) idem.Key { return idem.Key{Collection: "c", ID: fmt.Sprint("k", i)} }
	const n = 20
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for i := range n {
			if err := tx.Create(ctx, key(i), i); err != nil {
				return err
			}
		}
		for i := range n {
			if err := tx.Create(ctx, key(i), -1); !errors.Is(err, idem.ErrExists) {
				return fmt.Errorf("second create of %d: %v", i, err)
			}
			if i%3 == 0 {
				if err := tx.Put(ctx, key(i), 100+i); err != nil {
					return err
				}
			}
			if i%5 == 0 {
				if err := tx.Delete(ctx, key(i), 0); err != nil {
					return err
				}
			}
		}
		for i := range n {
			var got int
			_, err := tx.Get(ctx, key(i), &got)
			if want := want(i); (want < 0) != errors.Is(err, idem.ErrNotFound) || want >= 0 && got != want {
				return fmt.Errorf("in the transaction, %d: got %d (%v), want %d", i, got, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var got int
		_, err := s.Read(ctx, key(i), &got)
		if want := want(i); (want < 0) != errors.Is(err, idem.ErrNotFound) || want >= 0 && got != want {
			t.Errorf("committed, %d: got %d (%v), want %d", i, got, err, want)
		}
	}
}

// want is what TestTransactionOfManyKeys leaves at key i: -1 for none.
func want(i int) int {
	switch {
	case i%5 == 0:
		return -1
	case i%3 == 0:
		return 100 + i
	}
	return i
}

// A transaction that read more than eight keys runs again when the last of
// them changed before its commit: every read is checked, indexed or not.
func TestManyReadsCheckedAtCommit(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	key := func(i int) idem.Key { return idem.Key{Collection: "c", ID: fmt.Sprint("k", i)} }
	const n = 12
	attempts := 0
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		attempts++
		sum := 0
		for i := range n {
			var v int
			if _, err := tx.Get(ctx, key(i), &v); err != nil && !errors.Is(err, idem.ErrNotFound) {
				return err
			}
			sum += v
		}
		if attempts == 1 { // another transaction writes the last key read
			if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, key(n-1), 7) }); err != nil {
				return err
			}
		}
		return tx.Put(ctx, idem.Key{Collection: "c", ID: "sum"}, sum)
	})
	var sum int
	if _, rerr := s.Read(ctx, idem.Key{Collection: "c", ID: "sum"}, &sum); err != nil || rerr != nil || attempts != 2 || sum != 7 {
		t.Errorf("attempts %d, sum %d (%v, %v); want 2 attempts and the sum 7 of the second", attempts, sum, err, rerr)
	}
}
