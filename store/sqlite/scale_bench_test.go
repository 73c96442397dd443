package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/sqlite"
)

// TestScale is the scale benchmark (storebench.Scale), on demand:
//
//	IDEMKIT_SCALE=1 go test -count=1 -run TestScale -v -timeout 30m ./store/sqlite
func TestScale(t *testing.T) {
	storebench.Scale(t, storebench.ScaleHarness{
		New: func(t *testing.T, now func() time.Time) storebench.ScaleStore {
			path := filepath.Join(t.TempDir(), "scale.db")
			s := open(t, path, &sqlite.Options{Now: now, NoSweep: true}) // the benchmark sweeps
			return storebench.ScaleStore{Store: s, Load: func(ctx context.Context, n int, first time.Time) error {
				return loadOpRecords(ctx, path, n, first)
			}}
		},
		Sizes: []int{1_000_000},
		Batch: 16,
	})
}

// loadOpRecords inserts n rows shaped like op records (a random 64-hex-digit
// id, a document of about 200 bytes), expiring one microsecond apart from
// first on, in one transaction on a connection of its own.
func loadOpRecords(ctx context.Context, path string, n int, first time.Time) error {
	if n == 0 {
		return nil // the recursive CTE below makes at least one row
	}
	db, err := sql.Open("sqlite", "file://"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `BEGIN IMMEDIATE;
WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?1)
INSERT INTO docs (collection, id, version, doc, expires_at)
SELECT 'idem_ops', lower(hex(randomblob(32))), (SELECT last FROM docs_seq) + n + 1,
	json_object('tool', 'add_note', 'fingerprint', lower(hex(randomblob(32))), 'state', 'done',
		'result', json_object('content', json_array(json_object('type', 'text', 'text', 'ok')), 'id', n)),
	?2 + n * 1000
FROM i;
UPDATE docs_seq SET last = last + ?1;
COMMIT;`, n, first.UnixNano())
	return err
}
