package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/postgres"
	"github.com/idemkit/sdk/store/storetest"
)

// takenKeyTool wraps, with an op id, a handler that creates the note at key
// with opts and answers what Create returned: ErrExists as its own refusal
// (code not_saved), or Added{ID: key.ID}. runs counts its runs.
func takenKeyTool(s idem.Store, key idem.Key, runs *atomic.Int64, opts ...backend.WriteOption) mcp.ToolHandler {
	_, handle := idem.Tool(&mcp.Tool{Name: "add_note"}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in storebench.Note) (*mcp.CallToolResult, storebench.Added, error) {
			runs.Add(1)
			if err := tx.Create(ctx, key, in, opts...); err != nil {
				return nil, storebench.Added{}, err
			}
			return nil, storebench.Added{ID: key.ID}, nil
		}, idem.RequireOpID())
	return handle
}

// callTakenKeyTool calls handle with op id opID, within a deadline.
func callTakenKeyTool(t *testing.T, handle mcp.ToolHandler, opID string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := json.RawMessage(`{"text":"from ` + opID + `","op_id":"` + opID + `"}`)
	res, err := handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "add_note", Arguments: args}})
	if err != nil {
		t.Fatalf("call %s: %v", opID, err)
	}
	return res
}

// TestHandlerCreateOfTakenKey: a handler's Create of a key that holds a
// live document, whether sent at once or with the commit
// (backend.CreateAtCommit), is answered as the handler's ErrExists: refused
// with not_saved after at most one more run, never replayed (the op record
// is not there) and never retried until the call is contended. The live
// document stays as it was, and no op record is kept.
func TestHandlerCreateOfTakenKey(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	key := idem.Key{Collection: "notes", ID: "taken"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, key, storebench.Note{Text: "first"})
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []backend.WriteOption
	}{{"AtOnce", nil}, {"AtCommit", []backend.WriteOption{backend.CreateAtCommit()}}} {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int64
			handle := takenKeyTool(s, key, &runs, c.opts...)
			opID := "taken-" + c.name
			t0 := time.Now()
			res := callTakenKeyTool(t, handle, opID)
			took := time.Since(t0)
			code, _ := res.Meta[idem.MetaError].(string)
			if !res.IsError || code != string(idem.CodeNotSaved) || !strings.Contains(text(res), "already exists") {
				t.Errorf("IsError=%v code %q text %q; want not_saved with the handler's ErrExists", res.IsError, code, text(res))
			}
			if replayed(res) {
				t.Error("the handler's refused Create was answered as a replay")
			}
			if n := runs.Load(); n > 2 {
				t.Errorf("the handler ran %d times in %v, want at most 2", n, took)
			}
			if _, err := oprecord.Lookup(ctx, s, "", "add_note", opID); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("op record of the refused call: %v, want ErrNotFound", err)
			}
			var got storebench.Note
			if _, err := s.Read(ctx, key, &got); err != nil || got.Text != "first" {
				t.Errorf("the live document: %+v, %v; want the first one", got, err)
			}
		})
	}
}

// TestFirstCallOneRoundTrip: a first call whose handler creates a document
// costs one round trip: BEGIN, the handler's Create, the op record's and
// COMMIT, sent together.
func TestFirstCallOneRoundTrip(t *testing.T) {
	pool, counter := newCountingPool(t)
	s := newStore(t, pool, nil)
	var seq atomic.Int64
	call := storebench.GoSDK(s, func(ctx context.Context, tx idem.Tx, in storebench.Note) (storebench.Added, error) {
		id := "n" + strconv.FormatInt(seq.Add(1), 10)
		return storebench.Added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
	}, idem.RequireOpID())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 { // the first prepares the statements on the connection
		counter.reset()
		op := "op" + strconv.Itoa(i)
		replayed, err := call(ctx, json.RawMessage(`{"text":"`+op+`","op_id":"`+op+`"}`))
		if err != nil || replayed {
			t.Fatalf("call %d: replayed=%v, %v", i, replayed, err)
		}
	}
	if n := counter.count(); n != 1 {
		t.Errorf("a first call: %d round trips, want 1 ([BEGIN + note + op record + COMMIT])", n)
	}
	if seq.Load() != 3 {
		t.Errorf("the handler ran %d times for 3 first calls", seq.Load())
	}
}

// TestCreatePromiseKeptOnError: a Create that returned nil before it was
// sent is checked before fn's error is returned. If it meets a live
// document, fn's error came of a Create that did not happen: fn runs
// again and is told ErrExists, as if the Create had gone out at once, and
// Run returns what fn makes of that. So does a Create that met the live
// document when a later statement sent it, whatever fn did with that
// statement's error.
func TestCreatePromiseKeptOnError(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "notes", ID: "live"}
	other := idem.Key{Collection: "notes", ID: "other"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, note{Text: "first"}) })
	errCreated := errors.New("the note was created, then something else failed")
	for _, c := range []struct {
		name  string
		after func(ctx context.Context, tx idem.Tx) error // after a Create that returned nil
	}{
		{"Unsent", func(context.Context, idem.Tx) error { return errCreated }},
		{"SentByAGet", func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, other, nil) // fails: the Create goes first
			return fmt.Errorf("%w (the Get: %v)", errCreated, err)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			attempts := 0
			err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				attempts++
				if err := tx.Create(ctx, k, note{Text: "second"}); err != nil {
					return err
				}
				return c.after(ctx, tx)
			})
			if !errors.Is(err, idem.ErrExists) || attempts != 2 {
				t.Fatalf("Run = %v after %d attempts; want ErrExists after 2", err, attempts)
			}
			if n, _, err := getIn(t, s, k); err != nil || n.Text != "first" {
				t.Fatalf("the live document: %+v, %v; want the first", n, err)
			}
		})
	}
}

// TestCreateBesideNativeHandle: once fn holds the native pgx.Tx, whose
// statements do not send the Tx's waiting writes, a Create goes out at
// once, so that the handle's next statement sees it.
func TestCreateBesideNativeHandle(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	k := idem.Key{Collection: "notes", ID: "seen"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		var ptx pgx.Tx
		if !tx.As(&ptx) {
			return errors.New("As(*pgx.Tx) = false")
		}
		if err := tx.Create(ctx, k, note{Text: "mine"}); err != nil {
			return err
		}
		var got string
		err := ptx.QueryRow(ctx, "SELECT doc->>'text' FROM "+s.Table()+" WHERE collection = $1 AND id = $2", k.Collection, k.StoredID()).Scan(&got)
		if err != nil || got != "mine" {
			t.Errorf("the native handle after a Create read %q, %v; want the document", got, err)
		}
		return nil
	})
}

// TestCreatesOfTwoTakenKeys: a pipeline stops at its first failure, so a
// Create sent later tells of one taken key at a time; once one is found,
// the Run's next attempt sends every Create at once, and fn is told of both
// after one more attempt.
func TestCreatesOfTwoTakenKeys(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	k1, k2 := idem.Key{Collection: "notes", ID: "one"}, idem.Key{Collection: "notes", ID: "two"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, k1, note{Text: "first"}); err != nil {
			return err
		}
		return tx.Create(ctx, k2, note{Text: "first"})
	})
	attempts, exists := 0, 0
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		attempts, exists = attempts+1, 0
		for _, k := range []idem.Key{k1, k2} {
			switch err := tx.Create(ctx, k, note{Text: "second"}); {
			case errors.Is(err, idem.ErrExists):
				exists++
			case err != nil:
				return err
			}
		}
		return nil
	})
	if err != nil || exists != 2 || attempts != 2 {
		t.Fatalf("Run = %v after %d attempts, ErrExists %d times; want nil after 2, with ErrExists for both keys", err, attempts, exists)
	}
}

// TestCreateOverExpiredWithoutExpiry: a Create without expiry, sent later
// as a plain INSERT, replaces an expired document all the same.
func TestCreateOverExpiredWithoutExpiry(t *testing.T) {
	pool := newPool(t, 2)
	clock := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, pool, &postgres.Options{Now: clock.Now})
	k := idem.Key{Collection: "notes", ID: "old"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, note{Text: "old"}, backend.WithExpiry(clock.Now().Add(time.Second)))
	})
	clock.Advance(time.Second)
	attempts := 0
	run(t, s, func(ctx context.Context, tx idem.Tx) error {
		attempts++
		return tx.Create(ctx, k, note{Text: "new"})
	})
	if n, _, err := getIn(t, s, k); err != nil || n.Text != "new" {
		t.Fatalf("after the Create: %+v, %v; want the new document", n, err)
	}
	if attempts > 2 {
		t.Errorf("fn ran %d times, want at most 2", attempts)
	}
}

// TestTakenKeyIsNoUniqueViolationOfFn: a Create sent later as a plain
// INSERT that meets a document fails with a unique violation of the
// store's table, which is not counted as one of fn's own tables: fn's own
// violation after it is still retried once before Run returns it as it is.
func TestTakenKeyIsNoUniqueViolationOfFn(t *testing.T) {
	pool := newPool(t, 2)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	emails := strings.TrimSuffix(strings.Trim(s.Table(), `"`), "idem_docs") + "emails"
	for _, stmt := range []string{"CREATE TABLE " + emails + " (email text PRIMARY KEY)", "INSERT INTO " + emails + " VALUES ('a@example.com')"} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+emails); err != nil {
			t.Errorf("dropping %s: %v", emails, err)
		}
	})
	k := idem.Key{Collection: "users", ID: "a"}
	run(t, s, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, note{Text: "first"}) })
	attempts := 0
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		attempts++
		if err := tx.Create(ctx, k, note{Text: "second"}); err != nil && !errors.Is(err, idem.ErrExists) {
			return err
		}
		_, err := querier(t, tx).Exec(ctx, "INSERT INTO "+emails+" VALUES ($1)", "a@example.com")
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" || pe.TableName != emails || errors.Is(err, idem.ErrConflict) || attempts != 3 {
		t.Fatalf("Run = %v after %d attempts; want the unique violation of %s, as it is, after 3 (the taken key's, then fn's twice)", err, attempts, emails)
	}
}
