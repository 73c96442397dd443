package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// This store's Runs queue for as long as their context allows: slow
// handlers under concurrency are not turned into failures by BusyTimeout.
func TestSlowRunsQueueWithoutFailing(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), &sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 30
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
				time.Sleep(20 * time.Millisecond) // a slow handler
				return tx.Put(ctx, idem.Key{Collection: "c", ID: "k"}, i)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Run %d: %v", i, err)
		}
	}
}

// Opening a set-up file needs no write lock: a process can start while
// another holds a long transaction.
func TestOpenWhileAnotherStoreWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.db")
	a, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, idem.Key{Collection: "c", ID: "k"}, 1); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	b, err := sqlite.Open(path, &sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	close(release)
	if err != nil {
		t.Fatalf("Open while another store writes: %v", err)
	}
	b.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Close waits for the Run in progress, which commits; later Runs fail.
func TestCloseWaitsForTheRunInProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	inFn := make(chan struct{})
	done := make(chan error, 1)
	k := idem.Key{Collection: "c", ID: "k"}
	go func() {
		done <- s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			close(inFn)
			time.Sleep(50 * time.Millisecond)
			return tx.Put(ctx, k, 1)
		})
	}()
	<-inFn
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the Run in progress: %v", err)
	}
	if err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error { return nil }); err == nil {
		t.Error("a Run after Close succeeded")
	}
	r, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Read(context.Background(), k, nil); errors.Is(err, idem.ErrNotFound) {
		t.Error("the Run that was in progress at Close did not commit")
	}
}

// A Run still in fn when Close stops waiting does not commit, and Close says
// so.
func TestCloseGivingUpOnAStuckRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(path, &sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	inFn, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	k := idem.Key{Collection: "c", ID: "k"}
	go func() {
		done <- s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, k, 1); err != nil {
				return err
			}
			close(inFn)
			<-release
			return nil
		})
	}()
	<-inFn
	if err := s.Close(); err == nil {
		t.Error("Close gave up on a Run in fn and reported nothing")
	}
	close(release)
	if err := <-done; err == nil {
		t.Error("the Run Close gave up on committed")
	}
	r, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Read(context.Background(), k, nil); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("the Run Close gave up on left its write: %v", err)
	}
}
