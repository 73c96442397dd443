package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

// TestConnectionsTakeTurnsByScope: on a pool of one connection, the
// scopes waiting for it take turns, so one caller's queue never stands all
// in front of another's.
func TestConnectionsTakeTurnsByScope(t *testing.T) {
	s := newStore(t, newPool(t, 1), nil)
	storetest.TurnsByScope(t, s, func() int { return postgres.Waiting(s) })
}

// TestReadWaitsItsTurn: a Read outside a transaction waits for a
// connection in its caller's turn too (not in pgxpool's one line, ahead of
// the transactions waiting theirs), and reads once it has one.
func TestReadWaitsItsTurn(t *testing.T) {
	s := newStore(t, newPool(t, 1), nil)
	release := storetest.HoldRun(t, s)
	done := make(chan error, 1)
	go func() {
		var n note
		_, err := s.Read(backend.WithScope(context.Background(), "bob"), idem.Key{Collection: "notes", ID: "absent"}, &n)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); postgres.Waiting(s) < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Read is not waiting for a turn")
		}
	}
	release()
	select {
	case err := <-done:
		if !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Read = %v, want idem.ErrNotFound", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Read did not return once the connection was free")
	}
}
