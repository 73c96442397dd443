package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/sqlite"
	"github.com/idemkit/sdk/store/storetest"
)

func openTurns(t *testing.T) *sqlite.Store {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "turns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestWriterTakesTurnsByScope: SQLite's writer goes to the scopes waiting
// in turn, so one caller's queue never stands all in front of another's.
func TestWriterTakesTurnsByScope(t *testing.T) {
	s := openTurns(t)
	storetest.TurnsByScope(t, s, func() int { return sqlite.Waiting(s) })
}

// TestWriterTurnGivenUp: a transaction that stops waiting for the writer
// (its context ended) leaves the line, and the writer is free after.
func TestWriterTurnGivenUp(t *testing.T) {
	s := openTurns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := storetest.HoldRun(t, s)
	short, stop := context.WithCancel(backend.WithScope(ctx, "alice"))
	gaveUp := make(chan error, 1)
	go func() {
		gaveUp <- s.Run(short, func(ctx context.Context, tx idem.Tx) error { return nil })
	}()
	for deadline := time.Now().Add(10 * time.Second); sqlite.Waiting(s) < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("alice's Run is not waiting for the writer")
		}
	}
	stop()
	if err := <-gaveUp; err == nil {
		t.Fatal("a Run whose context ended while it waited ran")
	}
	release()
	ran := make(chan error, 1)
	go func() {
		ran <- s.Run(backend.WithScope(ctx, "alice"), func(ctx context.Context, tx idem.Tx) error { return nil })
	}()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not freed after the Run in line gave up")
	}
}
