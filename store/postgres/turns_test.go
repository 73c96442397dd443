package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/postgres"
)

// TestConnectionsTakeTurnsByScope: on a pool of one connection, while a
// transaction holds it, one scope queues four transactions and then two
// other scopes a transaction and a read; once the connection is free the
// scopes take turns, so each of the others waits for one of the first
// scope's transactions, not for all four.
func TestConnectionsTakeTurnsByScope(t *testing.T) {
	s := newStore(t, newPool(t, 1), nil)
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
	note := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, name)
	}
	var wg sync.WaitGroup
	for i, w := range [][2]string{{"alice", "a1"}, {"alice", "a2"}, {"alice", "a3"}, {"bob", "b1"}, {"alice", "a4"}, {"carol", "c1"}} {
		wg.Go(func() {
			ctx := backend.WithScope(ctx, w[0])
			var err error
			if w[0] == "carol" { // a read outside a transaction waits its turn too
				_, err = s.Read(ctx, idem.Key{Collection: "c", ID: "x"}, &map[string]string{})
				note(w[1])
				if err == idem.ErrNotFound {
					err = nil
				}
			} else {
				err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
					note(w[1])
					return tx.Put(ctx, idem.Key{Collection: "c", ID: w[1]}, map[string]string{"by": w[0]})
				})
			}
			if err != nil {
				t.Error(err)
			}
		})
		for deadline := time.Now().Add(10 * time.Second); postgres.Waiting(s) < i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is not waiting for a connection", w[1])
			}
		}
	}
	close(hold)
	wg.Wait()
	if got, want := fmt.Sprint(order), "[a1 b1 c1 a2 a3 a4]"; got != want {
		t.Fatalf("the connection went to %s, want %s: each scope's turn after one of alice's", got, want)
	}
}
