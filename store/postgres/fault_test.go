package postgres_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// terminate kills backend pid from another connection and waits until it is
// gone.
func terminate(t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	ctx := context.Background()
	var ok bool
	if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Errorf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
		return
	}
	waitFor(t, "the backend to exit", func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n)
		return err == nil && n == 0
	})
}

// awaitHandler waits until the first call's handler sends on ch, and fails
// the test if the call answers first (it failed before its handler ran) or
// nothing comes within 30 s.
func awaitHandler[T any](t *testing.T, ch <-chan T, done <-chan *mcp.CallToolResult) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case res := <-done:
		t.Fatalf("the first call answered before its handler reached the fault: %q (code %q)", text(res), errorCode(res))
	case <-time.After(30 * time.Second):
		t.Fatal("timed out after 30 s waiting for the first call's handler")
	}
	panic("unreachable")
}

// awaitResult waits at most 30 s for the call's result on done.
func awaitResult(t *testing.T, done <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("timed out after 30 s waiting for the call to answer")
	}
	panic("unreachable")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func errorCode(res *mcp.CallToolResult) string {
	s, _ := res.Meta[idem.MetaError].(string)
	return s
}

// checkConverges retries the call the way a client does after a failure and
// checks that the deposit lands exactly once.
func checkConverges(t *testing.T, b *bank, tool *depositTool, in depositIn, before int64) {
	t.Helper()
	res := call(t, tool, in)
	if res.IsError || replayed(res) {
		t.Fatalf("client retry: %q replayed=%v, want the deposit to run now", text(res), replayed(res))
	}
	again := call(t, tool, in)
	if again.IsError || !replayed(again) || text(again) != text(res) {
		t.Fatalf("second retry: %q replayed=%v, want %q replayed", text(again), replayed(again), text(res))
	}
	if s := b.state(t, in.OpID); s != (state{balance: before + in.Amount, transfers: 1, opRecord: true}) {
		t.Fatalf("after the retries: %+v, want the deposit executed exactly once", s)
	}
}

// TestKillWhileOpen: the backend dies while the handler's transaction is
// open. Nothing commits, and the client's retry executes once.
func TestKillWhileOpen(t *testing.T) {
	needsDirect(t, "kills the handler's backend by its pid")
	pool := newPool(t, 4)
	b := newBank(t, pool, nil)
	var first atomic.Bool
	first.Store(true)
	opened := make(chan uint32, 1)
	resume := make(chan struct{})
	var resumed sync.Once
	// Before the pool closes (cleanups run last in first out), so a failed
	// test does not leave the handler holding its connection.
	t.Cleanup(func() { resumed.Do(func() { close(resume) }) })
	tool := b.tool(t, func(ctx context.Context, ptx pgx.Tx) error {
		if !first.CompareAndSwap(true, false) {
			return nil
		}
		opened <- ptx.Conn().PgConn().PID()
		select {
		case <-resume:
		case <-time.After(30 * time.Second):
			return errors.New("the test did not resume the handler within 30 s")
		}
		// The handler goes on writing: its connection is gone.
		_, err := ptx.Exec(ctx, fmt.Sprintf("UPDATE %s SET version = version WHERE id = 'alice'", b.accounts))
		return err
	})
	in := depositIn{Account: "alice", Amount: 3, OpID: "kill-open"}
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(t, tool, in) }()
	terminate(t, pool, awaitHandler(t, opened, done))
	resumed.Do(func() { close(resume) })
	res := awaitResult(t, done)
	if !res.IsError {
		t.Fatalf("a call whose connection died mid-transaction succeeded: %q", text(res))
	}
	if s := b.state(t, in.OpID); s != (state{}) {
		t.Fatalf("after the killed transaction: %+v, want nothing committed", s)
	}
	checkConverges(t, b, tool, in, 0)
}

// TestKillWhileCommitting: the backend dies inside COMMIT (a deferred
// trigger holds the commit until the test kills it). The store reports an
// unknown outcome, never a plain failure or a success; nothing committed, and
// the client's retry executes once.
func TestKillWhileCommitting(t *testing.T) {
	needsDirect(t, "kills the backend by its pid, watches it in pg_stat_activity and holds a session advisory lock")
	pool := newPool(t, 4)
	b := newBank(t, pool, nil)
	ctx := context.Background()
	fn := b.transfers + "_hold"
	for _, stmt := range []string{
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF coalesce(current_setting('idemtest.hold_commit', true), '') <> '' THEN
		PERFORM pg_advisory_xact_lock(current_setting('idemtest.hold_commit')::bigint);
	END IF;
	RETURN NULL;
END $$`, fn),
		fmt.Sprintf(`CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s()`, b.transfers, fn),
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("creating the trigger: %v", err)
		}
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP FUNCTION IF EXISTS "+fn+"() CASCADE") })

	// The test holds the advisory lock the trigger waits for.
	lockKey := int64(time.Now().UnixNano())
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	defer holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey)

	var first atomic.Bool
	first.Store(true)
	pids := make(chan uint32, 1)
	var unknown atomic.Int32
	guard := idem.New(b.store, &idem.Options{Tracer: onCallEnd(func(ev idem.Event) {
		if ev.Outcome() == "unknown" && errors.Is(ev.Err, idem.ErrUnknownOutcome) {
			unknown.Add(1)
		}
	})})
	tool := newDepositTool(t, guard, depositHandler(b.accounts, b.transfers, func(ctx context.Context, ptx pgx.Tx) error {
		if !first.CompareAndSwap(true, false) {
			return nil
		}
		pids <- ptx.Conn().PgConn().PID()
		_, err := ptx.Exec(ctx, "SELECT set_config('idemtest.hold_commit', $1, true)", strconv.FormatInt(lockKey, 10))
		return err
	}), idem.OpID())

	in := depositIn{Account: "alice", Amount: 4, OpID: "kill-commit"}
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(t, tool, in) }()
	pid := awaitHandler(t, pids, done)
	waitFor(t, "the commit to wait in the deferred trigger", func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", int32(pid)).Scan(&n)
		return err == nil && n == 1
	})
	terminate(t, pool, pid)
	res := awaitResult(t, done)
	if !res.IsError || errorCode(res) != string(idem.CodeUnknownOutcome) {
		t.Fatalf("call killed in COMMIT: %q (code %q), want unknown_outcome", text(res), errorCode(res))
	}
	if unknown.Load() != 1 {
		t.Fatalf("Observe saw %d errors wrapping idem.ErrUnknownOutcome, want 1", unknown.Load())
	}
	if s := b.state(t, in.OpID); s != (state{}) {
		t.Fatalf("after the killed commit: %+v, want nothing committed", s)
	}
	checkConverges(t, b, tool, in, 0)
}

// cutConn loses the server's reply to the first write after arm that
// executes statements (not the round trip that prepares them): the server
// gets the whole pipeline (a COMMIT commits), the client sees the connection
// drop.
type cutConn struct {
	net.Conn
	mu         sync.Mutex // guards armed and cut
	armed, cut bool
}

func (c *cutConn) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

func (c *cutConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.armed && executes(p) {
		c.armed, c.cut = false, true
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// executes reports whether the frontend messages in p hold an Execute ('E')
// or a simple Query ('Q').
func executes(p []byte) bool {
	for len(p) >= 5 {
		if p[0] == 'E' || p[0] == 'Q' {
			return true
		}
		n := int(binary.BigEndian.Uint32(p[1:5]))
		if n < 4 || n+1 > len(p) {
			return false
		}
		p = p[1+n:]
	}
	return false
}

func (c *cutConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if !cut {
		return c.Conn.Read(p)
	}
	// Wait for the reply, so the server has processed what was sent,
	// then drop it.
	buf := make([]byte, 64<<10)
	c.Conn.Read(buf)
	time.Sleep(50 * time.Millisecond)
	c.Conn.Close()
	return 0, io.ErrUnexpectedEOF
}

// newCuttingPool is a pool whose connections can be told to lose a reply.
func newCuttingPool(t *testing.T) *pgxpool.Pool {
	return poolWith(t, 4, pgx.QueryExecModeCacheStatement, func(c net.Conn) net.Conn { return &cutConn{Conn: c} }, nil)
}

func armCut(t *testing.T, ptx pgx.Tx) {
	c, ok := ptx.Conn().PgConn().Conn().(*cutConn)
	if !ok {
		t.Errorf("connection is a %T, not a *cutConn", ptx.Conn().PgConn().Conn())
		return
	}
	c.arm()
}

// TestReplyLostAfterCommit: the COMMIT succeeds but its reply is lost. Run
// reports an unknown outcome (not a failure, not a success); the middleware
// finds the op record and answers with the stored result; a retry replays.
func TestReplyLostAfterCommit(t *testing.T) {
	pool := newCuttingPool(t)

	t.Run("Store", func(t *testing.T) {
		s := newStore(t, pool, nil)
		k := idem.Key{Collection: "docs", ID: "lost-reply"}
		attempts := 0
		err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			attempts++
			var ptx pgx.Tx
			if !tx.As(&ptx) {
				return errors.New("As(*pgx.Tx) = false")
			}
			armCut(t, ptx)
			return tx.Put(ctx, k, map[string]int{"n": 1})
		})
		if !errors.Is(err, idem.ErrUnknownOutcome) {
			t.Fatalf("Run whose COMMIT reply was lost = %v, want an error wrapping idem.ErrUnknownOutcome", err)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			t.Fatalf("unknown outcome carries a server error %v; the server said nothing", pe)
		}
		if attempts != 1 {
			t.Fatalf("fn ran %d times; an unknown outcome must not be retried", attempts)
		}
		if err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, k, nil)
			return err
		}); err != nil {
			t.Fatalf("the write whose reply was lost did commit, but Get says %v", err)
		}
	})

	t.Run("Middleware", func(t *testing.T) {
		b := newBank(t, pool, nil)
		var first atomic.Bool
		first.Store(true)
		tool := b.tool(t, func(ctx context.Context, ptx pgx.Tx) error {
			if first.CompareAndSwap(true, false) {
				armCut(t, ptx)
			}
			return nil
		})
		in := depositIn{Account: "alice", Amount: 6, OpID: "lost-reply"}
		res := call(t, tool, in)
		if res.IsError || text(res) != "balance 6" {
			t.Fatalf("call whose COMMIT reply was lost: %q (code %q), want the committed result", text(res), errorCode(res))
		}
		again := call(t, tool, in)
		if again.IsError || !replayed(again) || text(again) != "balance 6" {
			t.Fatalf("retry: %q replayed=%v, want the stored result replayed", text(again), replayed(again))
		}
		if s := b.state(t, in.OpID); s != (state{balance: 6, transfers: 1, opRecord: true}) {
			t.Fatalf("after the lost reply: %+v, want the deposit exactly once", s)
		}
	})
}

// TestConcurrentIdenticalCalls: 64 identical calls at once, through four
// wrapped handlers (four servers) on one database, execute once.
func TestConcurrentIdenticalCalls(t *testing.T) {
	pool := newPool(t, 8)
	b := newBank(t, pool, nil)
	var executions atomic.Int32
	tools := make([]*depositTool, 4)
	for i := range tools {
		tools[i] = b.tool(t, func(ctx context.Context, ptx pgx.Tx) error {
			executions.Add(1)
			return nil
		})
	}
	in := depositIn{Account: "alice", Amount: 7, OpID: "same"}
	const n = 64
	results := make([]*mcp.CallToolResult, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = call(t, tools[i%len(tools)], in)
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i, res := range results {
		if res.IsError || text(res) != "balance 7" {
			t.Fatalf("call %d: %q (code %q), want balance 7", i, text(res), errorCode(res))
		}
		if !replayed(res) {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d calls answered without a replay, want exactly 1", fresh)
	}
	if s := b.state(t, in.OpID); s != (state{balance: 7, transfers: 1, opRecord: true}) {
		t.Fatalf("after 64 identical calls: %+v, want the deposit exactly once", s)
	}
	t.Logf("handler ran %d times (losing transactions rolled back)", executions.Load())
}

// A deposit committed by process A; the client's repeat reaches process B,
// which has not answered the op, so B skips the read, runs the handler, and
// sends [insert op record + COMMIT]. The server refuses the insert (A's
// record is live) and nothing of B commits, but B loses the reply: unknown
// outcome. B's lookup finds A's record, not B's attempt's: B answers it as a
// replay and does not run its own AfterCommit hooks.
func TestRepeatElsewhereWithLostReplyIsAReplay(t *testing.T) {
	pool := newCuttingPool(t)
	b := newBank(t, pool, nil)
	var hooks atomic.Int32
	var armB atomic.Bool
	mk := func(cut *atomic.Bool) func(ctx context.Context, ptx pgx.Tx) error {
		return func(ctx context.Context, ptx pgx.Tx) error {
			if cut != nil && cut.CompareAndSwap(true, false) {
				armCut(t, ptx)
			}
			if !idem.AfterCommit(ctx, func(context.Context) { hooks.Add(1) }) {
				return errors.New("no transaction in the handler's context")
			}
			return nil
		}
	}
	toolA := b.tool(t, mk(nil))
	toolB := b.tool(t, mk(&armB))
	in := depositIn{Account: "alice", Amount: 6, OpID: "review-elsewhere"}
	if res := call(t, toolA, in); res.IsError {
		t.Fatalf("A: %q", text(res))
	}
	armB.Store(true)
	res := call(t, toolB, in)
	if res.IsError {
		t.Fatalf("B: %q (code %q)", text(res), errorCode(res))
	}
	if n := hooks.Load(); n != 1 {
		t.Errorf("after-commit hooks ran %d times for one deposit, want 1", n)
	}
	if !replayed(res) {
		t.Errorf("B's answer %q is not marked replayed, though B committed nothing", text(res))
	}
	if s := b.state(t, in.OpID); s != (state{balance: 6, transfers: 1, opRecord: true}) {
		t.Fatalf("state %+v", s)
	}
}

// onCallEnd is an idem.Tracer that calls f with how each call ended.
type onCallEnd func(idem.Event)

func (f onCallEnd) StartCall(ctx context.Context, _ idem.CallInfo) context.Context { return ctx }
func (f onCallEnd) EndCall(_ context.Context, e idem.Event)                        { f(e) }
