package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/postgres"
)

// tripCounter counts round trips on the connections of a pool: a write to
// the server after a read from it (or the first write) starts one.
type tripCounter struct {
	mu    sync.Mutex
	trips int
	read  map[*tripConn]bool
}

func (c *tripCounter) reset() {
	c.mu.Lock()
	c.trips = 0
	c.mu.Unlock()
}

func (c *tripCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips
}

type tripConn struct {
	net.Conn
	c *tripCounter
}

func (tc *tripConn) Write(p []byte) (int, error) {
	tc.c.mu.Lock()
	if read, seen := tc.c.read[tc]; read || !seen {
		tc.c.trips++
	}
	tc.c.read[tc] = false
	tc.c.mu.Unlock()
	return tc.Conn.Write(p)
}

func (tc *tripConn) Read(p []byte) (int, error) {
	n, err := tc.Conn.Read(p)
	tc.c.mu.Lock()
	tc.c.read[tc] = true
	tc.c.mu.Unlock()
	return n, err
}

// newCountingPool is a one-connection pool whose round trips are counted.
func newCountingPool(t *testing.T) (*pgxpool.Pool, *tripCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	counter := &tripCounter{read: make(map[*tripConn]bool)}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tripConn{Conn: c, c: counter}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, counter
}

// transfersIn counts the rows of b's transfers table with the given id.
func transfersIn(t *testing.T, b *bank, id string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*) FROM %s WHERE id = $1", b.transfers), id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func querier(t *testing.T, tx idem.Tx) postgres.Querier {
	t.Helper()
	var q postgres.Querier
	if !tx.As(&q) {
		t.Fatal("As(*postgres.Querier) = false")
	}
	return q
}

// TestQuerierPipelines: the Querier's first statement goes out with BEGIN
// and the Tx's waiting writes, so a handler's write and a Create with the
// commit cost two round trips in all, where the pgx.Tx from As costs three.
func TestQuerierPipelines(t *testing.T) {
	pool, counter := newCountingPool(t)
	b := newBank(t, pool, nil)
	s := b.store
	insert := fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ($1, $2, $3)", b.transfers)
	count := fmt.Sprintf("SELECT count(*) FROM %s WHERE account = $1", b.transfers)
	ctx := context.Background()

	// trips runs fn twice (the first run prepares the statements on the
	// connection) and returns the round trips of the second.
	trips := func(name string, fn func(i int) func(ctx context.Context, tx idem.Tx) error) int {
		t.Helper()
		for i := range 2 {
			counter.reset()
			if err := s.Run(ctx, fn(i)); err != nil {
				t.Fatalf("%s: Run: %v", name, err)
			}
		}
		return counter.count()
	}

	exec := trips("Exec", func(i int) func(ctx context.Context, tx idem.Tx) error {
		return func(ctx context.Context, tx idem.Tx) error {
			tag, err := querier(t, tx).Exec(ctx, insert, fmt.Sprintf("exec-%d", i), "alice", 1)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 || !tag.Insert() {
				return fmt.Errorf("command tag %q, want INSERT of 1 row", tag)
			}
			return tx.Create(ctx, idem.Key{Collection: "ops", ID: fmt.Sprintf("exec-%d", i)}, note{Text: "done"}, backend.CreateAtCommit())
		}
	})
	if exec != 2 {
		t.Errorf("Querier.Exec then a Create at commit: %d round trips, want 2 ([BEGIN + INSERT], [create + COMMIT])", exec)
	}

	queryRow := trips("QueryRow", func(i int) func(ctx context.Context, tx idem.Tx) error {
		return func(ctx context.Context, tx idem.Tx) error {
			var n int
			if err := querier(t, tx).QueryRow(ctx, count, "alice").Scan(&n); err != nil {
				return err
			}
			return tx.Put(ctx, idem.Key{Collection: "counts", ID: fmt.Sprint(i)}, n)
		}
	})
	if queryRow != 2 {
		t.Errorf("Querier.QueryRow then a Put: %d round trips, want 2 ([BEGIN + SELECT], [put + COMMIT])", queryRow)
	}

	// Waiting writes go out ahead of the Querier's statement, which sees
	// them.
	k := idem.Key{Collection: "notes", ID: "seen"}
	queued := trips("Put then QueryRow", func(i int) func(ctx context.Context, tx idem.Tx) error {
		return func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, k, note{Text: fmt.Sprint("put ", i)}); err != nil {
				return err
			}
			var got string
			err := querier(t, tx).QueryRow(ctx, "SELECT doc->>'text' FROM "+s.Table()+" WHERE collection = $1 AND id = $2", k.Collection, k.StoredID()).Scan(&got)
			if err != nil {
				return err
			}
			if got != fmt.Sprint("put ", i) {
				return fmt.Errorf("the Querier read %q, want the Put's document", got)
			}
			return nil
		}
	})
	if queued != 2 {
		t.Errorf("Put then Querier.QueryRow: %d round trips, want 2", queued)
	}

	// The counter itself: the eager pgx.Tx sends BEGIN alone.
	eager := trips("pgx.Tx", func(i int) func(ctx context.Context, tx idem.Tx) error {
		return func(ctx context.Context, tx idem.Tx) error {
			var ptx pgx.Tx
			if !tx.As(&ptx) {
				return errors.New("As(*pgx.Tx) = false")
			}
			_, err := ptx.Exec(ctx, insert, fmt.Sprintf("eager-%d", i), "alice", 1)
			return err
		}
	})
	if eager != 3 {
		t.Errorf("pgx.Tx from As: %d round trips, want 3 ([BEGIN], [INSERT], [COMMIT])", eager)
	}
	// Read, which answers a replay, is one round trip.
	for range 2 {
		counter.reset()
		if _, err := s.Read(ctx, idem.Key{Collection: "ops", ID: "exec-1"}, nil); err != nil {
			t.Fatalf("Read: %v", err)
		}
	}
	if n := counter.count(); n != 1 {
		t.Errorf("Read: %d round trips, want 1", n)
	}
	if n := transfersIn(t, b, "exec-1"); n != 1 {
		t.Fatalf("the Querier's insert: %d rows after the commit, want 1", n)
	}
}

// TestQuerierNoRowsKeepsTx: pgx.ErrNoRows from QueryRow's Scan is an answer:
// the transaction goes on and commits.
func TestQuerierNoRowsKeepsTx(t *testing.T) {
	pool := newPool(t, 2)
	b := newBank(t, pool, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "notes", ID: "after-no-rows"}
	err := b.store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		q := querier(t, tx)
		var id string
		err := q.QueryRow(ctx, fmt.Sprintf("SELECT id FROM %s WHERE id = $1", b.transfers), "missing").Scan(&id)
		if err != pgx.ErrNoRows {
			return fmt.Errorf("QueryRow of a missing row: %v, want pgx.ErrNoRows itself", err)
		}
		if _, err := q.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ($1, 'alice', 1)", b.transfers), "after-no-rows"); err != nil {
			return fmt.Errorf("Exec after ErrNoRows: %w", err)
		}
		return tx.Create(ctx, k, note{Text: "kept"})
	})
	if err != nil {
		t.Fatalf("Run = %v, want nil: ErrNoRows must not abort the transaction", err)
	}
	if n := transfersIn(t, b, "after-no-rows"); n != 1 {
		t.Fatalf("%d transfer rows, want 1", n)
	}
	if _, _, err := getIn(t, b.store, k); err != nil {
		t.Fatalf("the Create after ErrNoRows: %v", err)
	}
}

// TestQuerierFailedStatementAbortsCommit: a statement that fails through the
// Querier aborts the transaction: later statements fail, and Run refuses to
// commit even if fn returns nil. The error is fn's, not a lost race: Run
// does not retry it.
func TestQuerierFailedStatementAbortsCommit(t *testing.T) {
	pool := newPool(t, 2)
	b := newBank(t, pool, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "notes", ID: "aborted"}
	for _, tc := range []struct {
		name string
		fail func(ctx context.Context, q postgres.Querier) error
	}{
		{"Exec", func(ctx context.Context, q postgres.Querier) error {
			_, err := q.Exec(ctx, "SELECT 1 / $1::int", 0)
			return err
		}},
		{"QueryRow", func(ctx context.Context, q postgres.Querier) error {
			var n int
			return q.QueryRow(ctx, "SELECT 1 / $1::int", 0).Scan(&n)
		}},
		{"ExecWithoutArguments", func(ctx context.Context, q postgres.Querier) error {
			_, err := q.Exec(ctx, "SELECT 1 / 0")
			return err
		}},
		{"Query", func(ctx context.Context, q postgres.Querier) error {
			rows, err := q.Query(ctx, "SELECT 1 / $1::int", 0)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "aborted-" + tc.name
			attempts := 0
			err := b.store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				attempts++
				q := querier(t, tx)
				if err := tx.Put(ctx, k, note{Text: "lost"}); err != nil {
					return err
				}
				if _, err := q.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ($1, 'alice', 1)", b.transfers), id); err != nil {
					return err
				}
				err := tc.fail(ctx, q)
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "22012" {
					t.Errorf("the failing statement returned %v, want a *pgconn.PgError 22012", err)
				}
				if _, err := q.Exec(ctx, "SELECT $1::int", 1); err == nil {
					t.Error("a statement after the failure succeeded")
				}
				return nil // ignore the failure
			})
			if err == nil {
				t.Fatal("Run committed after a failed statement")
			}
			if errors.Is(err, idem.ErrConflict) || attempts != 1 {
				t.Fatalf("Run = %v after %d attempts; want fn's error, not retried", err, attempts)
			}
			if n := transfersIn(t, b, id); n != 0 {
				t.Fatalf("%d transfer rows committed, want 0", n)
			}
			if _, _, err := getIn(t, b.store, k); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("the Put: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestQuerierCommitsWithTx: what fn writes through the Querier (Exec,
// SendBatch, CopyFrom, an Exec of several statements) commits when fn
// returns nil and rolls back when it returns an error; Query sees the Tx's
// writes.
func TestQuerierCommitsWithTx(t *testing.T) {
	pool := newPool(t, 2)
	b := newBank(t, pool, nil)
	ctx := context.Background()
	insert := fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ($1, 'alice', 1)", b.transfers)
	write := func(prefix string) func(ctx context.Context, tx idem.Tx) error {
		return func(ctx context.Context, tx idem.Tx) error {
			q := querier(t, tx)
			if _, err := q.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ('%s-multi1', 'alice', 1); INSERT INTO %s (id, account, amount) VALUES ('%s-multi2', 'alice', 1)", b.transfers, prefix, b.transfers, prefix)); err != nil {
				return fmt.Errorf("Exec of two statements: %w", err)
			}
			if _, err := q.Exec(ctx, insert, prefix+"-exec"); err != nil {
				return err
			}
			batch := &pgx.Batch{}
			batch.Queue(insert, prefix+"-batch")
			if err := q.SendBatch(ctx, batch).Close(); err != nil {
				return fmt.Errorf("SendBatch: %w", err)
			}
			if _, err := q.CopyFrom(ctx, pgx.Identifier{b.transfers}, []string{"id", "account", "amount"},
				pgx.CopyFromRows([][]any{{prefix + "-copy", "alice", int64(1)}})); err != nil {
				return fmt.Errorf("CopyFrom: %w", err)
			}
			rows, err := q.Query(ctx, fmt.Sprintf("SELECT id FROM %s WHERE id LIKE $1 ORDER BY id", b.transfers), prefix+"-%")
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("Query: %w", err)
			}
			if len(ids) != 5 {
				return fmt.Errorf("Query saw %v, want the 5 rows written", ids)
			}
			return nil
		}
	}
	if err := b.store.Run(ctx, write("kept")); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, id := range []string{"kept-multi1", "kept-multi2", "kept-exec", "kept-batch", "kept-copy"} {
		if n := transfersIn(t, b, id); n != 1 {
			t.Fatalf("%s: %d rows after the commit, want 1", id, n)
		}
	}
	failure := errors.New("handler failed")
	err := b.store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if err := write("dropped")(ctx, tx); err != nil {
			return err
		}
		return failure
	})
	if !errors.Is(err, failure) {
		t.Fatalf("Run = %v, want fn's error", err)
	}
	for _, id := range []string{"dropped-multi1", "dropped-exec", "dropped-batch", "dropped-copy"} {
		if n := transfersIn(t, b, id); n != 0 {
			t.Fatalf("%s: %d rows after the rollback, want 0", id, n)
		}
	}
}

// TestQuerierAfterRun: a Querier kept past fn's return refuses every call.
func TestQuerierAfterRun(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	var q postgres.Querier
	var kept idem.Tx
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		q, kept = querier(t, tx), tx
		return nil
	})
	if _, err := q.Exec(ctx, "SELECT $1::int", 1); err == nil {
		t.Error("Exec after Run returned succeeded")
	}
	var n int
	if err := q.QueryRow(ctx, "SELECT $1::int", 1).Scan(&n); err == nil {
		t.Error("QueryRow after Run returned succeeded")
	}
	if _, err := q.Query(ctx, "SELECT 1"); err == nil {
		t.Error("Query after Run returned succeeded")
	}
	if err := q.SendBatch(ctx, &pgx.Batch{}).Close(); err == nil {
		t.Error("SendBatch after Run returned succeeded")
	}
	if _, err := q.CopyFrom(ctx, pgx.Identifier{"x"}, []string{"a"}, pgx.CopyFromRows(nil)); err == nil {
		t.Error("CopyFrom after Run returned succeeded")
	}
	var again postgres.Querier
	if kept.As(&again) {
		t.Error("As after Run returned = true")
	}
}
