package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/internal/storebench"
)

// byHand is storebench.ByHand on PostgreSQL: what a server would write by
// hand with plain SQL in place of the middleware, on the store's pool, in
// two tables of its own. The note goes to notes (a primary key and a jsonb
// document, as the store keeps a document); the op record to ops (a
// primary key, a jsonb result and an expiry a day ahead, indexed for a
// sweep, as the store keeps an op record). Transactions run at the
// server's default isolation, READ COMMITTED, under which an insert that
// meets a row another transaction is inserting waits for that
// transaction's end, so no op id is answered twice.
type byHand struct {
	pool  *pgxpool.Pool
	opsPK string // the name of ops' primary key

	claim       string // $1 op id: an op record with no result yet, or nothing on conflict
	storeResult string // $1 op id, $2 result
	readResult  string // $1 op id -> result
	insertNote  string // $1 id, $2 doc
	insertOp    string // $1 op id, $2 result: a unique violation if it is there
	countNotes  string // $1 ids -> how many of them are there
}

func newByHand(tb testing.TB, pool *pgxpool.Pool) *byHand {
	tb.Helper()
	prefix := fmt.Sprintf("t%d_%d_hand_", os.Getpid(), stores.Add(1))
	notes := pgx.Identifier{prefix + "notes"}.Sanitize()
	ops := pgx.Identifier{prefix + "ops"}.Sanitize()
	h := &byHand{
		pool:        pool,
		opsPK:       prefix + "ops_pkey",
		claim:       "INSERT INTO " + ops + " (op_id, expires_at) VALUES ($1, now() + interval '1 day') ON CONFLICT DO NOTHING",
		storeResult: "UPDATE " + ops + " SET result = $2 WHERE op_id = $1",
		readResult:  "SELECT result FROM " + ops + " WHERE op_id = $1",
		insertNote:  "INSERT INTO " + notes + " (id, doc) VALUES ($1, $2)",
		insertOp:    "INSERT INTO " + ops + " (op_id, result, expires_at) VALUES ($1, $2, now() + interval '1 day')",
		countNotes:  "SELECT count(*) FROM " + notes + " WHERE id = ANY($1)",
	}
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE ` + notes + ` (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL)`,
		`CREATE TABLE ` + ops + ` (op_id text COLLATE "C" CONSTRAINT ` + pgx.Identifier{h.opsPK}.Sanitize() + ` PRIMARY KEY,
	result jsonb, expires_at timestamptz NOT NULL)`,
		`CREATE INDEX ` + pgx.Identifier{prefix + "ops_expires_at_idx"}.Sanitize() + ` ON ` + ops + ` (expires_at)`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			tb.Fatalf("creating the hand-written protocols' tables: %v", err)
		}
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+notes+", "+ops); err != nil {
			tb.Errorf("dropping the hand-written protocols' tables: %v", err)
		}
	})
	return h
}

// Optimistic: BEGIN; the claim; on conflict the stored result; else the
// note, the result, COMMIT: five round trips for a first call.
func (h *byHand) Optimistic(ctx context.Context, opID, noteID string, in storebench.Note) (storebench.Added, bool, error) {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return storebench.Added{}, false, err
	}
	defer tx.Rollback(ctx) // after Commit, nothing is sent
	tag, err := tx.Exec(ctx, h.claim, opID)
	if err != nil {
		return storebench.Added{}, false, err
	}
	if tag.RowsAffected() == 0 {
		out, err := h.stored(ctx, tx, opID)
		return out, true, err
	}
	doc, err := json.Marshal(in)
	if err != nil {
		return storebench.Added{}, false, err
	}
	if _, err := tx.Exec(ctx, h.insertNote, noteID, string(doc)); err != nil {
		return storebench.Added{}, false, err
	}
	out := storebench.Added{ID: noteID}
	result, err := json.Marshal(out)
	if err != nil {
		return storebench.Added{}, false, err
	}
	if _, err := tx.Exec(ctx, h.storeResult, opID, string(result)); err != nil {
		return storebench.Added{}, false, err
	}
	return out, false, tx.Commit(ctx)
}

// Pipelined: BEGIN, the note, the op record and COMMIT in one batch, one
// round trip. The statements are prepared under their own text once per
// connection, as pgx does for its statement cache, but kept when a batch
// fails: pgx forgets the cached statements of a failed batch, so a repeat
// would cost the next call on its connection a round trip to prepare them
// again.
func (h *byHand) Pipelined(ctx context.Context, opID, noteID string, in storebench.Note) (storebench.Added, bool, error) {
	doc, err := json.Marshal(in)
	if err != nil {
		return storebench.Added{}, false, err
	}
	out := storebench.Added{ID: noteID}
	result, err := json.Marshal(out)
	if err != nil {
		return storebench.Added{}, false, err
	}
	c, err := h.pool.Acquire(ctx)
	if err != nil {
		return storebench.Added{}, false, err
	}
	defer c.Release()
	conn := c.Conn()
	for _, sql := range []string{"begin", h.insertNote, h.insertOp, "commit"} {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return storebench.Added{}, false, err
		}
	}
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(h.insertNote, noteID, string(doc))
	b.Queue(h.insertOp, opID, string(result))
	b.Queue("commit")
	err = conn.SendBatch(ctx, b).Close()
	if err == nil {
		return out, false, nil
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" || pe.ConstraintName != h.opsPK { // unique_violation
		return storebench.Added{}, false, err
	}
	// The statements after the failed insert were skipped: the
	// transaction is open, and aborted.
	if _, err := conn.Exec(ctx, "rollback"); err != nil {
		return storebench.Added{}, false, err
	}
	out, err = h.stored(ctx, conn, opID)
	return out, true, err
}

// Select is a replay by hand: one SELECT of the op record and the decode of
// its result.
func (h *byHand) Select(ctx context.Context, opID string) (storebench.Added, error) {
	return h.stored(ctx, h.pool, opID)
}

// stored reads and decodes opID's result through q.
func (h *byHand) stored(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, opID string) (storebench.Added, error) {
	var raw []byte
	if err := q.QueryRow(ctx, h.readResult, opID).Scan(&raw); err != nil {
		return storebench.Added{}, err
	}
	if raw == nil {
		return storebench.Added{}, fmt.Errorf("op %s has no result", opID)
	}
	var out storebench.Added
	err := json.Unmarshal(raw, &out)
	return out, err
}

func (h *byHand) Notes(ctx context.Context, ids []string) (int, error) {
	var n int
	err := h.pool.QueryRow(ctx, h.countNotes, ids).Scan(&n)
	return n, err
}

// TestByHand: the hand-written protocols that BenchmarkSuite times beside
// the middleware keep what they promise. Of concurrent calls with one op
// id, one writes the note and the others are answered with its result; and
// a repeat leaves its connection in the pool (a connection closed by each
// repeat would charge a new one's start to the calls after it).
func TestByHand(t *testing.T) {
	pool := newPool(t, 4)
	h := newByHand(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []struct {
		name string
		call func(ctx context.Context, opID, noteID string, in storebench.Note) (storebench.Added, bool, error)
	}{{"optimistic", h.Optimistic}, {"pipelined", h.Pipelined}} {
		t.Run(p.name, func(t *testing.T) {
			const calls = 8
			opID := p.name + "-race"
			outs := make([]storebench.Added, calls)
			repeats := make([]bool, calls)
			errs := make([]error, calls)
			ids := make([]string, calls)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range calls {
				ids[i] = fmt.Sprintf("%s-note-%d", p.name, i)
				wg.Go(func() {
					<-start
					outs[i], repeats[i], errs[i] = p.call(ctx, opID, ids[i], storebench.Note{Text: opID})
				})
			}
			close(start)
			wg.Wait()
			var first []int
			for i := range calls {
				if errs[i] != nil {
					t.Fatalf("call %d: %v", i, errs[i])
				}
				if !repeats[i] {
					first = append(first, i)
				}
			}
			if len(first) != 1 {
				t.Fatalf("%d of %d concurrent calls ran as first calls, want 1", len(first), calls)
			}
			want := storebench.Added{ID: ids[first[0]]}
			for i, out := range outs {
				if out != want {
					t.Errorf("call %d answered %+v, want the first call's %+v", i, out, want)
				}
			}
			if n, err := h.Notes(ctx, ids); err != nil || n != 1 {
				t.Fatalf("the calls left %d notes (%v), want 1", n, err)
			}
			conns := pool.Stat().NewConnsCount()
			for i := range 20 {
				out, repeat, err := p.call(ctx, opID, fmt.Sprintf("%s-again-%d", p.name, i), storebench.Note{Text: opID})
				if err != nil || !repeat || out != want {
					t.Fatalf("repeat %d: %+v repeat=%v (%v), want %+v replayed", i, out, repeat, err, want)
				}
			}
			if n := pool.Stat().NewConnsCount() - conns; n != 0 {
				t.Errorf("20 repeats opened %d new connections, want 0", n)
			}
		})
	}
}
