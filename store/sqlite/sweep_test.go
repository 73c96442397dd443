package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
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

// putExpiring puts docs documents with ids 0, 1, ... that expire a second
// after clock's time, 200 to a Run.
func putExpiring(t *testing.T, s *sqlite.Store, clock *storetest.Clock, docs int) {
	t.Helper()
	for start := 0; start < docs; start += 200 {
		if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			for i := start; i < min(start+200, docs); i++ {
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
}

// TestSweepTransactionsAreSmall: a sweep of 400 documents deletes them in
// transactions of at most 16 documents each, and a Run that arrives during
// the sweep commits before the sweep ends instead of waiting for all of it.
func TestSweepTransactionsAreSmall(t *testing.T) {
	const docs, bound = 400, 16
	w := watchCommits(t, "sweepwatch")
	clock := storetest.NewClock(time.Unix(1_700_000_000, 0))
	s := open(t, filepath.Join(t.TempDir(), "sweepwatch.db"), &sqlite.Options{Now: clock.Now, NoSweep: true})
	ctx := t.Context()
	putExpiring(t, s, clock, docs)
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

// TestSweepKeepsTheWALSmall: a sweep's commits do not checkpoint, so the
// sweep must: after sweeping 8,000 documents (about 2,500 pages of WAL
// frames without checkpoints), the WAL file is no larger than the
// 1,000 pages at which SQLite's own automatic checkpoint would keep it.
func TestSweepKeepsTheWALSmall(t *testing.T) {
	const docs = 8000
	clock := storetest.NewClock(time.Unix(1_700_000_000, 0))
	path := filepath.Join(t.TempDir(), "wal.db")
	s := open(t, path, &sqlite.Options{Now: clock.Now, NoSweep: true})
	putExpiring(t, s, clock, docs)
	clock.Advance(time.Minute)

	// Start from an empty WAL file: the puts' frames are not the sweep's.
	db, err := sql.Open("sqlite", "file://"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, copied int
	if err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied); err != nil || busy != 0 {
		t.Fatalf("truncating the WAL: busy %d, %v", busy, err)
	}
	var page int64
	if err := db.QueryRow("PRAGMA page_size").Scan(&page); err != nil {
		t.Fatal(err)
	}

	// Sweep calls of one batch each, as a ticker with a small limit
	// makes them, and one large call for the rest.
	swept := 0
	for range docs / 2 / 16 {
		n, err := s.Sweep(t.Context(), 16)
		if err != nil || n != 16 {
			t.Fatalf("Sweep = %d, %v; want 16", n, err)
		}
		swept += n
	}
	n, err := s.Sweep(t.Context(), docs)
	if err != nil || swept+n != docs {
		t.Fatalf("swept %d, %v; want %d", swept+n, err, docs)
	}

	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	const walHeader, frameHeader = 32, 24
	if bound := walHeader + 1000*(frameHeader+page); fi.Size() > bound {
		t.Errorf("after sweeping %d documents the WAL file is %d bytes (%d pages), want at most %d (1,000 pages)",
			docs, fi.Size(), (fi.Size()-walHeader)/(frameHeader+page), bound)
	}
}

// TestRunsGoBeforeSweepBatches: a Run that waits for the writer goes before
// a sweep batch that was waiting longer, instead of waiting for it too.
func TestRunsGoBeforeSweepBatches(t *testing.T) {
	const docs = 64
	w := watchCommits(t, "sweepyield")
	clock := storetest.NewClock(time.Unix(1_700_000_000, 0))
	s := open(t, filepath.Join(t.TempDir(), "sweepyield.db"), &sqlite.Options{Now: clock.Now, NoSweep: true})
	putExpiring(t, s, clock, docs)
	clock.Advance(time.Minute)
	ctx := t.Context()

	// A Run holds the writer while a sweep and then a second Run queue
	// for it.
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			close(holding)
			<-release
			return tx.Put(ctx, idem.Key{Collection: "c", ID: "first"}, note{Text: "y"})
		})
	}()
	<-holding
	swept := make(chan error, 1)
	go func() {
		n, err := s.Sweep(ctx, docs)
		if err == nil && n != docs {
			err = fmt.Errorf("swept %d, want %d", n, docs)
		}
		swept <- err
	}()
	time.Sleep(100 * time.Millisecond) // the sweep queues first
	second := make(chan error, 1)
	go func() {
		second <- s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			select {
			case <-w.first:
				return errors.New("a sweep batch went before this Run, which was waiting for the writer")
			default:
			}
			return tx.Put(ctx, idem.Key{Collection: "c", ID: "second"}, note{Text: "y"})
		})
	}()
	time.Sleep(100 * time.Millisecond) // the second Run queues behind it
	close(release)
	for _, c := range []chan error{first, second, swept} {
		if err := <-c; err != nil {
			t.Error(err)
		}
	}
}
