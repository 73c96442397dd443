package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/sdk/idem"
)

// A handler that asks for the native pgx.Tx of a transaction that could not
// begin (its connection failed on BEGIN) meets the reason in the handle's
// statements, and Run returns it: As never hides why the transaction is
// unusable.
func TestAsOnAFailedBeginGivesTheReason(t *testing.T) {
	var mu sync.Mutex
	var conns []*cutConn
	pool := poolWith(t, 1, pgx.QueryExecModeCacheStatement, func(c net.Conn) net.Conn {
		cc := &cutConn{Conn: c}
		mu.Lock()
		conns = append(conns, cc)
		mu.Unlock()
		return cc
	}, nil)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	mu.Lock()
	for _, c := range conns {
		c.arm() // the next statement, BEGIN, loses its reply
	}
	mu.Unlock()
	var asOK bool
	var execErr error
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		var ptx pgx.Tx
		if asOK = tx.As(&ptx); !asOK {
			return errors.New("As(*pgx.Tx) = false")
		}
		_, execErr = ptx.Exec(ctx, "SELECT 1")
		return execErr
	})
	if !asOK {
		t.Fatalf("As reported false and hid the reason; Run = %v", err)
	}
	if execErr == nil || err == nil {
		t.Fatalf("a statement on a transaction that never began: Exec = %v, Run = %v", execErr, err)
	}
	for _, e := range []error{execErr, err} {
		if strings.Contains(e.Error(), "tx is closed") || !strings.Contains(e.Error(), "postgres") {
			t.Errorf("the error hides why the transaction is unusable: %v", e)
		}
	}
	t.Logf("Exec: %v; Run: %v", execErr, err)
}

// A unique violation in the handler's own table that no concurrent writer
// caused (the value is already taken) is tried once more, as a create race
// would need, and then returned as the violation itself: not retried up to
// MaxAttempts with backoff, not reported as a conflict.
func TestPermanentUniqueViolationIsReturnedAtOnce(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	table := fmt.Sprintf("users_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (email text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+" VALUES ('taken@example.org')"); err != nil {
		t.Fatal(err)
	}
	calls := 0
	start := time.Now()
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		calls++
		var ptx pgx.Tx
		if !tx.As(&ptx) {
			return errors.New("no native transaction")
		}
		_, err := ptx.Exec(ctx, "INSERT INTO "+table+" VALUES ('taken@example.org')")
		return err
	})
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("Run = %v, want the unique violation", err)
	}
	if errors.Is(err, idem.ErrConflict) {
		t.Errorf("a permanent violation reported as a conflict: %v", err)
	}
	if calls != 2 {
		t.Errorf("fn ran %d times, want 2 (one retry settles a create race)", calls)
	}
	t.Logf("a permanent unique violation took %v and %d calls of fn", took, calls)
}

// A create race in the handler's own table still settles: of concurrent
// calls that insert the same row when it is absent, one inserts and the
// others find it on their retry.
func TestUniqueViolationRaceStillSettles(t *testing.T) {
	pool := newPool(t, 8)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	table := fmt.Sprintf("slots_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (id text PRIMARY KEY, n int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				var ptx pgx.Tx
				if !tx.As(&ptx) {
					return errors.New("no native transaction")
				}
				var n int
				err := ptx.QueryRow(ctx, "SELECT n FROM "+table+" WHERE id = 'slot'").Scan(&n)
				if errors.Is(err, pgx.ErrNoRows) {
					_, err = ptx.Exec(ctx, "INSERT INTO "+table+" VALUES ('slot', 1)")
				}
				return err
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("rows = %d (%v), want 1", rows, err)
	}
}

// A server connection that already holds one of the store's statements
// under its name, unknown to pgx (what a pooler that moves clients between
// server connections does), fails the call with an error that says what to
// set, not a bare "already exists".
func TestStatementAlreadyThereSaysWhatToSet(t *testing.T) {
	pool := newPool(t, 1)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "k"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
			return err
		}
		return tx.Put(ctx, k, 1)
	}); err != nil {
		t.Fatal(err)
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var name, stmt string
	if err := c.QueryRow(ctx, "SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'idemkit_%' AND statement LIKE 'SELECT version%'",
		pgx.QueryExecModeSimpleProtocol).Scan(&name, &stmt); err != nil {
		t.Fatalf("finding the store's statements: %v", err)
	}
	// pgx forgets it and the server drops it; then the server has it again,
	// behind pgx's back.
	if err := c.Conn().Deallocate(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "PREPARE "+name+" AS "+stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("preparing %s again: %v", name, err)
	}
	c.Release()
	errRun := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	_, errRead := s.Read(ctx, k, nil)
	if errRun == nil && errRead == nil {
		t.Skip("no call met the statement already there") // the store may have prepared it on another path
	}
	for _, err := range []error{errRun, errRead} {
		if err == nil {
			continue
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42P05" || !strings.Contains(err.Error(), "default_query_exec_mode") {
			t.Errorf("error %v: want the 42P05 with what to set (default_query_exec_mode)", err)
		}
	}
}
