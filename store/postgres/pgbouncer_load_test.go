package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/postgres"
)

// loadIn and loadOut are the load scenario's tool: each execution writes one
// row to a table of its own and answers with the row's sequence number, so
// a second execution of an op id shows as a second row and a replay of the
// wrong answer as another number.
type loadIn struct {
	OpID   string `json:"op_id"`
	Amount int64  `json:"amount"`
}

type loadOut struct {
	Seq int64 `json:"seq"`
}

// loadCall is one call of a scenario: a first call of op i, or a repeat
// (the same op id and arguments) of one whose first call has answered.
type loadCall struct {
	op     int // index of the op id; -1: a repeat, of an op picked when it is sent
	repeat bool
}

// loadSchedule is n calls of which every tenth is a repeat.
func loadSchedule(n int) []loadCall {
	calls := make([]loadCall, n)
	op := 0
	for i := range calls {
		if i%10 == 9 {
			calls[i] = loadCall{op: -1, repeat: true}
			continue
		}
		calls[i] = loadCall{op: op}
		op++
	}
	return calls
}

func loadOpID(op int) string { return fmt.Sprintf("op-%05d", op) }

// loadDB is the scenario's tables, made through admin: the store's, migrated,
// and the tool's own, writes(seq, op_id, amount), without a unique key on
// op_id.
type loadDB struct {
	admin  *pgxpool.Pool
	prefix string
	writes string
}

func newLoadDB(t *testing.T, admin *pgxpool.Pool) *loadDB {
	t.Helper()
	s := newStore(t, admin, nil)
	prefix := strings.TrimSuffix(strings.Trim(s.Table(), `"`), "idem_docs")
	db := &loadDB{admin: admin, prefix: prefix, writes: prefix + "writes"}
	ctx := context.Background()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (seq bigserial PRIMARY KEY, op_id text NOT NULL, amount bigint NOT NULL)", db.writes)); err != nil {
		t.Fatalf("creating the tool's table: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+db.writes); err != nil {
			t.Errorf("dropping %s: %v", db.writes, err)
		}
	})
	return db
}

// rowsPerOp counts the tool's rows by op id.
func (db *loadDB) rowsPerOp(t *testing.T) map[string]int {
	t.Helper()
	rows, err := db.admin.Query(context.Background(), "SELECT op_id, count(*) FROM "+db.writes+" GROUP BY op_id")
	if err != nil {
		t.Fatalf("counting rows: %v", err)
	}
	m := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		m[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// loadApp is one start of the application: a pool, a store on it and the
// wrapped tool.
type loadApp struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	handle mcp.ToolHandler
}

// start starts the application on pool: New, Migrate, the tool. It returns
// the error of New or Migrate.
func (db *loadDB) start(pool *pgxpool.Pool, log *callLog) (*loadApp, error) {
	s, err := postgres.New(pool, &postgres.Options{TablePrefix: db.prefix})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	insert := "INSERT INTO " + db.writes + " (op_id, amount) VALUES ($1, $2) RETURNING seq"
	guard := idem.New(s, &idem.Options{Logger: slog.New(log)})
	_, handle := idem.Tool(&mcp.Tool{Name: "deposit"}, guard, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in loadIn) (*mcp.CallToolResult, loadOut, error) {
		var q postgres.Querier
		if !tx.As(&q) {
			return nil, loadOut{}, errors.New("not a PostgreSQL store")
		}
		var out loadOut
		if err := q.QueryRow(ctx, insert, in.OpID, in.Amount).Scan(&out.Seq); err != nil {
			return nil, loadOut{}, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("row %d", out.Seq)}}}, out, nil
	}, idem.OpID())
	return &loadApp{pool: pool, store: s, handle: handle}, nil
}

// outcome is what one call answered. failure is empty for an answer; else
// it holds everything that says why: the Go error, the result's text and
// what the middleware logged for the call.
type outcome struct {
	replayed bool
	out      loadOut
	text     string
	failure  string
}

type opIDKey struct{}

// call calls the tool with op id id, bounded by a timeout so a stuck call
// fails instead of hanging the test.
func (a *loadApp) call(log *callLog, id string, amount int64) outcome {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), opIDKey{}, id), 30*time.Second)
	defer cancel()
	args := json.RawMessage(fmt.Sprintf(`{"op_id":%q,"amount":%d}`, id, amount))
	res, err := a.handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "deposit", Arguments: args}})
	switch {
	case err != nil:
		return outcome{failure: "error: " + err.Error() + log.of(id)}
	case res.IsError:
		return outcome{failure: fmt.Sprintf("tool error (code %q): %s%s", errorCode(res), text(res), log.of(id))}
	}
	o := outcome{replayed: replayed(res), text: text(res)}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &o.out)
	}
	if err != nil || o.out.Seq == 0 {
		o.failure = fmt.Sprintf("structured content %s (%v), want a row number", b, err)
	}
	return o
}

// callLog is a slog.Handler that keeps, per op id (from the call's
// context), what the middleware logged at warning level and above: the
// store's error behind an internal error.
type callLog struct {
	mu   sync.Mutex
	byOp map[string][]string
}

func newCallLog() *callLog { return &callLog{byOp: map[string][]string{}} }

func (l *callLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }
func (l *callLog) WithAttrs([]slog.Attr) slog.Handler               { return l }
func (l *callLog) WithGroup(string) slog.Handler                    { return l }

func (l *callLog) Handle(ctx context.Context, r slog.Record) error {
	id, _ := ctx.Value(opIDKey{}).(string)
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			line += ": " + a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.byOp[id] = append(l.byOp[id], line)
	l.mu.Unlock()
	return nil
}

// of returns and forgets what was logged for op id.
func (l *callLog) of(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.byOp[id]
	delete(l.byOp, id)
	if len(lines) == 0 {
		return ""
	}
	return " [logged: " + strings.Join(lines, "; ") + "]"
}

// sent is one call of a run with what it answered.
type sent struct {
	op     int
	repeat bool
	outcome
}

// runCalls sends calls from workers goroutines, in order of the schedule.
// A repeat picks an op whose first call has answered (without an error),
// so it can only be answered from the op record. A call with its op set
// (every call of a run after a restart) uses that op.
func runCalls(app *loadApp, log *callLog, calls []loadCall, workers int, seed uint64) []sent {
	out := make([]sent, len(calls))
	var mu sync.Mutex // guards answered and rng
	var answered []int
	rng := rand.New(rand.NewPCG(seed, 1))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(calls) {
					return
				}
				c := calls[i]
				op := c.op
				if op < 0 {
					mu.Lock()
					if len(answered) > 0 {
						op = answered[rng.IntN(len(answered))]
					}
					mu.Unlock()
				}
				if op < 0 {
					out[i] = sent{op: -1, repeat: true, outcome: outcome{failure: "no first call had answered to repeat"}}
					continue
				}
				o := app.call(log, loadOpID(op), int64(op)+1)
				out[i] = sent{op: op, repeat: c.repeat, outcome: o}
				if !c.repeat && o.failure == "" {
					mu.Lock()
					answered = append(answered, op)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// replaySchedule is the calls of an earlier run again, with their ops
// fixed: repeats of the ops whose first call answered (in first), first
// calls of the others.
func replaySchedule(run []sent, first map[int]outcome) []loadCall {
	calls := make([]loadCall, 0, len(run))
	for _, s := range run {
		if s.op >= 0 {
			_, answered := first[s.op]
			calls = append(calls, loadCall{op: s.op, repeat: answered})
		}
	}
	return calls
}

// check compares a run with what the first calls answered (first, filled
// in from the run's own first calls) and returns its failures, at most max
// of them spelled out, and a summary as the issue counts them.
func check(run []sent, first map[int]outcome, max int) (failures []string, summary string) {
	var firsts, firstOK, repeats, repeatOK int
	for _, s := range run {
		if s.repeat {
			continue
		}
		firsts++
		if s.failure != "" {
			failures = append(failures, fmt.Sprintf("first call of %s: %s", loadOpID(s.op), s.failure))
			continue
		}
		if s.replayed {
			failures = append(failures, fmt.Sprintf("first call of %s answered as a replay", loadOpID(s.op)))
			continue
		}
		firstOK++
		first[s.op] = s.outcome
	}
	for _, s := range run {
		if !s.repeat {
			continue
		}
		repeats++
		f, ok := first[s.op]
		switch {
		case s.failure != "":
			failures = append(failures, fmt.Sprintf("repeat of %s: %s", loadOpID(s.op), s.failure))
		case !ok:
			failures = append(failures, fmt.Sprintf("repeat of %s answered %q, but its first call did not answer", loadOpID(s.op), s.text))
		case !s.replayed:
			failures = append(failures, fmt.Sprintf("repeat of %s answered %q without replaying: executed again", loadOpID(s.op), s.text))
		case s.out != f.out || s.text != f.text:
			failures = append(failures, fmt.Sprintf("repeat of %s replayed %+v %q, first answer %+v %q", loadOpID(s.op), s.out, s.text, f.out, f.text))
		default:
			repeatOK++
		}
	}
	summary = fmt.Sprintf("%d of %d repeats replayed", repeatOK, repeats)
	if firsts > 0 {
		summary = fmt.Sprintf("%d of %d first calls answered, %s", firstOK, firsts, summary)
	}
	if len(failures) > max {
		failures = append(failures[:max], fmt.Sprintf("... and %d more", len(failures)-max))
	}
	return failures, summary
}

// TestLoadBehindPgBouncer: in each supported query mode, through a
// PgBouncer in transaction pooling with 4 server connections, 8 goroutines
// send 2,000 op-id calls of which 10% repeat an earlier answered call. Every
// first call is answered and executes once (one row per op id), every
// repeat replays the first answer. Then the application restarts (a new
// pool and store on the same PgBouncer) and sends the 2,000 calls' op ids
// again: every one replays.
func TestLoadBehindPgBouncer(t *testing.T) {
	pooledURL(t)
	const calls, workers = 2000, 8
	for i, mode := range pooledModes {
		t.Run(mode.String(), func(t *testing.T) {
			db := newLoadDB(t, pooledPool(t, 2, pgx.QueryExecModeSimpleProtocol))
			log := newCallLog()
			app, err := db.start(pooledPool(t, workers, mode), log)
			if err != nil {
				t.Fatalf("starting: %v", err)
			}
			t0 := time.Now()
			run := runCalls(app, log, loadSchedule(calls), workers, uint64(i))
			took := time.Since(t0)
			first := map[int]outcome{}
			failures, summary := check(run, first, 10)
			for _, f := range failures {
				t.Error(f)
			}
			rows := db.rowsPerOp(t)
			for op := range first {
				if n := rows[loadOpID(op)]; n != 1 {
					t.Errorf("op %s wrote %d rows, want 1", loadOpID(op), n)
				}
			}
			if len(rows) != len(first) {
				t.Errorf("%d op ids wrote rows, %d first calls answered", len(rows), len(first))
			}

			// The restart: the old pool's client connections close; the
			// server connections behind PgBouncer stay.
			app.store.Close()
			app.pool.Close()
			app, err = db.start(pooledPool(t, workers, mode), log)
			if err != nil {
				t.Fatalf("starting again: %v", err)
			}
			t1 := time.Now()
			again := runCalls(app, log, replaySchedule(run, first), workers, uint64(i))
			tookAgain := time.Since(t1)
			failuresAgain, summaryAgain := check(again, first, 10)
			for _, f := range failuresAgain {
				t.Error("after the restart: " + f)
			}
			if after := db.rowsPerOp(t); len(after) != len(rows) || fmt.Sprint(after) != fmt.Sprint(rows) {
				t.Errorf("the replays after the restart wrote rows: %d op ids with rows, %d before", len(after), len(rows))
			}
			t.Logf("%s: %d calls in %v (%s); after the restart %d calls in %v (%s)",
				mode, len(run), took.Round(time.Millisecond), summary, len(again), tookAgain.Round(time.Millisecond), summaryAgain)
		})
	}
}

// TestDefaultModeBehindPgBouncer: pgx's default query mode (a statement
// cache of named prepared statements) cannot work through a transaction
// pooler as is. The store must either work anyway (every call answered,
// every repeat replayed, across a restart) or fail every failing call with
// an error that says what to do: one naming default_query_exec_mode, never
// PostgreSQL's raw "prepared statement ... already exists".
func TestDefaultModeBehindPgBouncer(t *testing.T) {
	pooledURL(t)
	const calls, workers = 50, 4
	db := newLoadDB(t, pooledPool(t, 2, pgx.QueryExecModeSimpleProtocol))
	log := newCallLog()
	var failures []string // not actionable
	var actionable int
	judge := func(what, failure string) {
		if strings.Contains(failure, "default_query_exec_mode") {
			actionable++
			return
		}
		failures = append(failures, what+": "+failure)
	}
	defer func() {
		for i, f := range failures {
			if i == 10 {
				t.Errorf("... and %d more", len(failures)-10)
				break
			}
			t.Error(f)
		}
		if len(failures) > 0 {
			t.Errorf("%d failures do not name default_query_exec_mode (%d do)", len(failures), actionable)
		}
	}()
	first := map[int]outcome{}
	var run []sent
	for start := range 2 { // the second start is the application restarted
		pool := pooledPool(t, workers, pgx.QueryExecModeCacheStatement)
		app, err := db.start(pool, log)
		if err != nil {
			judge(fmt.Sprintf("start %d: New or Migrate", start+1), err.Error())
			t.Logf("start %d: New or Migrate failed: %v", start+1, err)
			return
		}
		// Store.Run on its own, as a caller without the middleware.
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				k := idem.Key{Collection: "runs", ID: fmt.Sprintf("%d-%d", start, g)}
				err := app.store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
					if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
						return err
					}
					return tx.Create(ctx, k, map[string]int{"g": g})
				})
				if err != nil {
					mu.Lock()
					judge("Store.Run "+k.ID, err.Error())
					mu.Unlock()
				}
			}()
		}
		wg.Wait()

		var schedule []loadCall
		if start == 0 {
			schedule = loadSchedule(calls)
		} else {
			schedule = replaySchedule(run, first)
		}
		this := runCalls(app, log, schedule, workers, 7)
		if start == 0 {
			run = this
		}
		for _, s := range this {
			if s.failure != "" && s.op >= 0 { // op < 0: a repeat with no answered call to repeat, never sent
				judge(fmt.Sprintf("start %d: call of %s", start+1, loadOpID(s.op)), s.failure)
			}
		}
		// Answers must be right whatever failed: a repeat answered is a
		// replay of the first answer.
		var ok []sent
		for _, s := range this {
			if s.failure == "" {
				ok = append(ok, s)
			}
		}
		wrong, summary := check(ok, first, 10)
		for _, w := range wrong {
			t.Errorf("start %d: %s", start+1, w)
		}
		t.Logf("start %d: %d calls: %s; %d failed", start+1, len(this), summary, len(this)-len(ok))
		app.store.Close()
		pool.Close()
	}
	rows := db.rowsPerOp(t)
	for op := range first {
		if n := rows[loadOpID(op)]; n != 1 {
			t.Errorf("op %s wrote %d rows, want 1", loadOpID(op), n)
		}
	}
}
