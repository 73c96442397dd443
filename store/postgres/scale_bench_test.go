package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/postgres"
)

// TestScale is the scale benchmark (storebench.Scale), on demand, on tables
// of its own that it drops at the end:
//
//	IDEMKIT_SCALE=1 go test -count=1 -run TestScale -v -timeout 60m ./store/postgres
func TestScale(t *testing.T) {
	serverURL(t)
	storebench.Scale(t, storebench.ScaleHarness{
		New: func(t *testing.T, now func() time.Time) storebench.ScaleStore {
			pool := newPool(t, 8)
			s := newStore(t, pool, &postgres.Options{Now: now, NoSweep: true}) // the benchmark sweeps
			// The version sequence is named after the table.
			seq := strings.TrimSuffix(s.Table(), `"`) + `_version_seq"`
			return storebench.ScaleStore{Store: s, Load: func(ctx context.Context, n int, first time.Time) error {
				// Rows shaped like op records: a random-looking 64-hex-digit
				// id, a document of about 200 bytes.
				if _, err := pool.Exec(ctx, `INSERT INTO `+s.Table()+` (collection, id, version, doc, expires_at)
SELECT 'idem_ops', encode(sha256(('scale' || i)::bytea), 'hex'), nextval('`+seq+`'),
	jsonb_build_object('tool', 'add_note', 'fingerprint', md5(i::text) || md5((i + 1)::text), 'state', 'done',
		'result', jsonb_build_object('content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'ok')), 'id', i)),
	$1::timestamptz + i * interval '1 microsecond'
FROM generate_series(0, $2::int - 1) i`, first, n); err != nil {
					return err
				}
				// As autovacuum would have, on a table filled over time.
				_, err := pool.Exec(ctx, "VACUUM ANALYZE "+s.Table())
				return err
			}}
		},
		Sizes: []int{1_000_000, 5_000_000},
		Batch: 100,
	})
}
