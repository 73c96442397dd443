package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/sqlite"
	"github.com/idemkit/sdk/store/storetest"
)

// commitWatch counts, on the connections of the database files whose
// names hold its mark, how many rows of docs each committed transaction
// deleted.
type commitWatch struct {
	mark    string
	mu      sync.Mutex
	deletes []int // per commit that deleted any
	first   chan struct{}
}

var (
	watchHook sync.Once
	watching  atomic.Pointer[commitWatch]
)

// watchCommits starts counting the deletes of each transaction on the
// files whose names hold mark. The driver's connection hook is global, so
// it is registered once and finds the current watch by the file name.
func watchCommits(t *testing.T, mark string) *commitWatch {
	w := &commitWatch{mark: mark, first: make(chan struct{})}
	watching.Store(w)
	t.Cleanup(func() { watching.Store(nil) })
	watchHook.Do(func() {
		sqlitedriver.RegisterConnectionHook(func(conn sqlitedriver.ExecQuerierContext, dsn string) error {
			w := watching.Load()
			h, ok := conn.(sqlitedriver.HookRegisterer)
			if w == nil || !ok || !strings.Contains(dsn, w.mark) {
				return nil
			}
			var n atomic.Int64
			h.RegisterPreUpdateHook(func(d sqlitedriver.SQLitePreUpdateData) {
				if d.Op == sqlite3.SQLITE_DELETE && d.TableName == "docs" {
					n.Add(1)
				}
			})
			h.RegisterCommitHook(func() int32 {
				if k := n.Swap(0); k > 0 {
					w.mu.Lock()
					if len(w.deletes) == 0 {
						close(w.first)
					}
					w.deletes = append(w.deletes, int(k))
					w.mu.Unlock()
				}
				return 0
			})
			return nil
		})
	})
	return w
}

// TestSweepTransactionsAreSmall: a sweep of 400 documents deletes them in
// transactions of at most 16 documents each, and a Run that arrives during
// the sweep commits before the sweep ends instead of waiting for all of it.
func TestSweepTransactionsAreSmall(t *testing.T) {
	const docs, bound = 400, 16
	w := watchCommits(t, "sweepwatch")
	clock := storetest.NewClock(time.Unix(1_700_000_000, 0))
	s := open(t, filepath.Join(t.TempDir(), "sweepwatch.db"), &sqlite.Options{Now: clock.Now})
	ctx := t.Context()
	for start := 0; start < docs; start += 200 {
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			for i := start; i < start+200; i++ {
				exp := clock.Now().Add(time.Second + time.Duration(i)*time.Microsecond)
				if err := tx.Put(ctx, idem.Key{Collection: "c", ID: fmt.Sprint(i)}, note{Text: "x"}, backend.WithExpiry(exp)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)

	var swept atomic.Bool
	runDone := make(chan bool, 1)
	go func() {
		<-w.first
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return tx.Put(ctx, idem.Key{Collection: "c", ID: "during"}, note{Text: "y"})
		})
		if err != nil {
			t.Errorf("Run during the sweep: %v", err)
		}
		runDone <- swept.Load()
	}()
	n, err := s.Sweep(ctx, 10*docs)
	swept.Store(true)
	if err != nil || n != docs {
		t.Fatalf("Sweep = %d, %v; want %d", n, err, docs)
	}
	if <-runDone {
		t.Error("a Run that arrived during the sweep waited for all of it")
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, k := range w.deletes {
		total += k
		if k > bound {
			t.Errorf("one transaction deleted %d documents, want at most %d", k, bound)
		}
	}
	if total != docs {
		t.Errorf("the commits seen deleted %d documents, want %d", total, docs)
	}
}
