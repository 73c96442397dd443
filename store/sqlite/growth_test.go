package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/sdk/store/sqlite"
	"github.com/idemkit/sdk/store/storetest"
)

// dbSize is what a database file holds: its pages (as SQLite counts them,
// the WAL's included) and those of them on the freelist, which later
// writes reuse before the file grows.
type dbSize struct {
	pages, free, pageSize int64
}

func (d dbSize) used() int64  { return (d.pages - d.free) * d.pageSize }
func (d dbSize) total() int64 { return d.pages * d.pageSize }

func measure(t *testing.T, db *sql.DB) dbSize {
	t.Helper()
	var d dbSize
	for _, q := range []struct {
		pragma string
		dst    *int64
	}{{"page_count", &d.pages}, {"freelist_count", &d.free}, {"page_size", &d.pageSize}} {
		if err := db.QueryRow("PRAGMA " + q.pragma).Scan(q.dst); err != nil {
			t.Fatalf("PRAGMA %s: %v", q.pragma, err)
		}
	}
	return d
}

func fileBytes(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// TestBackgroundSweepReclaims: op records of calls with unique op ids grow
// the database; once they expire, the background sweep, with nothing
// calling Sweep, brings the pages in use back near their number before the
// calls. The file keeps its size (SQLite frees pages to its freelist and
// does not shrink the file): the same calls again reuse those pages, and
// the database does not grow.
func TestBackgroundSweepReclaims(t *testing.T) {
	path := filepath.Join(t.TempDir(), "growth.db")
	clock := storetest.NewClock(time.Now())
	s := open(t, path, &sqlite.Options{Now: clock.Now, SweepEvery: 100 * time.Millisecond})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	label := storetest.GrowthLabel(t)

	before := measure(t, db)
	start := time.Now()
	storetest.FillOpRecords(t, s, clock.Now, time.Minute, storetest.GrowthCalls, label)
	filled := time.Since(start)
	grown, grownFile := measure(t, db), fileBytes(path)+fileBytes(path+"-wal")
	growth := grown.used() - before.used()
	if growth < int64(storetest.GrowthCalls*label) {
		t.Fatalf("the database grew by %d bytes with %d answers of %d bytes: the op records are not kept", growth, storetest.GrowthCalls, label)
	}

	clock.Advance(2 * time.Minute) // every op record has expired
	start = time.Now()
	after := measure(t, db)
	for after.used()-before.used() > growth/20 && time.Since(start) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
		after = measure(t, db)
	}
	swept := time.Since(start)
	t.Logf("pages in use: %.1f MB before, %.1f MB after %d calls of %d bytes (%v), %.1f MB %v after they expired; database %.1f MB then, with %.1f MB free; files (database and WAL) %.1f MB",
		mb(before.used()), mb(grown.used()), storetest.GrowthCalls, label, filled.Round(time.Millisecond), mb(after.used()), swept.Round(time.Millisecond), mb(after.total()), mb(after.free*after.pageSize), mb(grownFile))
	if after.used()-before.used() > growth/20 {
		t.Fatalf("30 s after the op records expired the database still uses %d of the %d bytes it grew by", after.used()-before.used(), growth)
	}

	storetest.FillOpRecords(t, s, clock.Now, time.Minute, storetest.GrowthCalls, label)
	again := measure(t, db)
	t.Logf("the same calls again: database %.1f MB, %.1f MB in use; files %.1f MB", mb(again.total()), mb(again.used()), mb(fileBytes(path)+fileBytes(path+"-wal")))
	if again.total() > grown.total()+grown.total()/10 {
		t.Errorf("the same calls again grew the database from %d to %d bytes: the freed pages were not reused", grown.total(), again.total())
	}
}
