package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/sqlite"
)

// TestWriterTakesTurnsByScope: while one transaction holds the writer, a
// scope queues five transactions and then two other scopes one each; once
// the writer is free the scopes take turns, so each of the others waits
// for one of the first scope's transactions, not for all five.
func TestWriterTakesTurnsByScope(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "turns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	hold, entered := make(chan struct{}), make(chan struct{})
	go s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		close(entered)
		<-hold
		return nil
	})
	<-entered

	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	run := func(scope, name string) {
		wg.Go(func() {
			err := s.Run(backend.WithScope(ctx, scope), func(ctx context.Context, tx idem.Tx) error {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, name)
				return tx.Put(ctx, idem.Key{Collection: "c", ID: name}, map[string]string{"by": scope})
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	// Each Run is queued before the next starts: a Run that has not yet
	// queued cannot hold up one that has, so wait for it to be waiting.
	queued := 0
	for _, r := range [][2]string{{"alice", "a1"}, {"alice", "a2"}, {"alice", "a3"}, {"alice", "a4"}, {"bob", "b1"}, {"alice", "a5"}, {"carol", "c1"}} {
		run(r[0], r[1])
		queued++
		for deadline := time.Now().Add(10 * time.Second); sqlite.Waiting(s) < queued; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not waiting for the writer", r[1])
			}
		}
	}
	close(hold)
	wg.Wait()
	if got, want := fmt.Sprint(order), "[a1 b1 c1 a2 a3 a4 a5]"; got != want {
		t.Fatalf("the writer went to %s, want %s: each scope's turn after one of alice's", got, want)
	}
}

// TestWriterTurnGivenUp: a transaction that stops waiting for the writer
// (its context ended) leaves the line; the ones behind it run.
func TestWriterTurnGivenUp(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "turns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hold, entered := make(chan struct{}), make(chan struct{})
	go s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		close(entered)
		<-hold
		return nil
	})
	<-entered
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
	close(hold)
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
