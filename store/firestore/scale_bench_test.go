package firestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	fs "cloud.google.com/go/firestore"

	"github.com/idemkit/sdk/internal/storebench"
	idemfs "github.com/idemkit/sdk/store/firestore"
)

// TestScale is the scale benchmark (storebench.Scale), on demand, each store
// in a project (a database) of its own on the emulator, cleared at the end.
// The emulator keeps every document in its JVM heap (about 2.8 KB a loaded
// record): 5M needs a heap of about 18 GB. Run it on an emulator of its
// own, which scripts/with-firestore.sh starts when
// IDEMKIT_FIRESTORE_EMULATOR_HOST is not set:
//
//	env -u IDEMKIT_FIRESTORE_EMULATOR_HOST IDEMKIT_FIRESTORE_PORT=8390 IDEMKIT_SCALE=1 \
//		scripts/with-firestore.sh go test -count=1 -run TestScale -v -timeout 60m ./store/firestore
//
// Firestore has no Sweep (its TTL policy deletes expired documents): the
// calls are measured, the sweep is skipped.
func TestScale(t *testing.T) {
	emulatorHost(t)
	storebench.Scale(t, storebench.ScaleHarness{
		New: func(t *testing.T, now func() time.Time) storebench.ScaleStore {
			c := scaleClient(t)
			s, err := idemfs.New(c, &idemfs.Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return storebench.ScaleStore{Store: s, Load: func(ctx context.Context, n int, first time.Time) error {
				return loadOpRecords(ctx, c, n, first)
			}}
		},
		// The load ran at 360-1,250 records/s on 2 busy cores: 250k in
		// 3-6 min, 1M would take 13-46 min.
		Sizes: []int{250_000},
	})
}

var scaleProjects atomic.Int64

// scaleClient returns a client on a new project of the emulator, so that
// an empty store is not one collection of a database that holds the loaded
// one; the project is cleared at cleanup.
func scaleClient(t testing.TB) *fs.Client {
	t.Helper()
	host := emulatorHost(t)
	os.Setenv("FIRESTORE_EMULATOR_HOST", host)
	p := fmt.Sprintf("%s-scale-%d", project, scaleProjects.Add(1))
	c, err := fs.NewClient(context.Background(), p)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		if err := clear(host, p); err != nil {
			t.Errorf("clearing project %s: %v", p, err)
		}
	})
	return c
}

// The load's concurrency: loadWorkers workers, each with a BulkWriter of
// loadChunk writes at a time (which it sends 20 a BatchWrite, all at once).
// More in flight made the emulator, on 2 busy cores, answer a BatchWrite
// after the client's deadline.
const loadWorkers, loadChunk = 8, 200

// loadOpRecords creates storebench.ScaleRecord 0..n-1 as the store writes
// op records of keys without an owner and without a collection prefix
// (idem_ops/{id}: doc, expiresAt, writtenAt), with BulkWriters.
func loadOpRecords(ctx context.Context, c *fs.Client, n int, first time.Time) error {
	return storebench.LoadInBatches(ctx, n, loadChunk, loadWorkers, func(ctx context.Context, from, to int) error {
		return writeChunk(ctx, c, from, to, first)
	})
}

// writeChunk creates records from..to-1 with one BulkWriter.
func writeChunk(ctx context.Context, c *fs.Client, from, to int, first time.Time) error {
	bw := c.BulkWriter(ctx)
	var jobs []*fs.BulkWriterJob
	for i := from; i < to; i++ {
		k, doc, exp, err := storebench.ScaleRecord(i, first)
		if err == nil && k.Owner != "" {
			err = errors.New("a loaded record has an owner")
		}
		var j *fs.BulkWriterJob
		if err == nil {
			j, err = bw.Create(c.Doc(k.Collection+"/"+k.ID), map[string]any{
				idemfs.FieldDocument:  string(doc),
				idemfs.FieldExpiresAt: exp,
				idemfs.FieldWrittenAt: fs.ServerTimestamp,
			})
		}
		if err != nil {
			bw.End()
			return err
		}
		jobs = append(jobs, j)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return err
		}
	}
	return nil
}

// TestScaleLoad: what the scale benchmark's load writes is what the store
// reads as op records, so that the database it measures holds op records.
func TestScaleLoad(t *testing.T) {
	c := scaleClient(t)
	first := time.Now().Add(time.Hour)
	s, err := idemfs.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := loadOpRecords(t.Context(), c, 30, first); err != nil {
		t.Fatal(err)
	}
	storebench.CheckScaleLoad(t, s, 30, first)
}
