package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// HoldRun starts a Run of s that holds its transaction until the returned
// release is called, and returns once it is inside: on a store of one slot
// (SQLite's writer, a pool of one connection), every other transaction
// then waits.
func HoldRun(t *testing.T, s idem.Store) (release func()) {
	t.Helper()
	hold, entered := make(chan struct{}), make(chan struct{})
	go s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		close(entered)
		<-hold
		return nil
	})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the holding Run did not start")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return release
}

// TurnsByScope checks that s, a store of one slot for which waiting
// reports how many transactions wait, hands the slot to the scopes waiting
// in turn (kit.Turns): while a Run holds it, alice queues four Runs, then
// bob one, alice one more and carol one; once it is free, bob and carol
// each wait for one of alice's, not for all of them. Each Run notes its
// turn inside its transaction, while it holds the slot.
func TurnsByScope(t *testing.T, s idem.Store, waiting func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := HoldRun(t, s)

	var mu sync.Mutex
	var order []string
	note := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, name)
	}
	var wg sync.WaitGroup
	for i, w := range [][2]string{{"alice", "a1"}, {"alice", "a2"}, {"alice", "a3"}, {"alice", "a4"}, {"bob", "b1"}, {"alice", "a5"}, {"carol", "c1"}} {
		wg.Go(func() {
			err := s.Run(backend.WithScope(ctx, w[0]), func(ctx context.Context, tx idem.Tx) error {
				note(w[1])
				return tx.Put(ctx, idem.Key{Collection: "turns", ID: w[1]}, map[string]string{"by": w[0]})
			})
			if err != nil {
				t.Error(err)
			}
		})
		// Each call is in line before the next starts: one that has not
		// yet queued cannot hold up one that has.
		for deadline := time.Now().Add(10 * time.Second); waiting() < i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not waiting for the slot", w[1])
			}
		}
	}
	release()
	wg.Wait()
	if got, want := fmt.Sprint(order), "[a1 b1 c1 a2 a3 a4 a5]"; got != want {
		t.Fatalf("the slot went to %s, want %s: each scope's turn after one of alice's", got, want)
	}
}
