package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/store/postgres"
)

// A server with an existing schema adopts idemkit: its deposit handler keeps
// writing its own tables with plain SQL, through the pgx.Tx that As hands
// out, and the op record commits in the same transaction. A client that
// sends a deposit again, not having seen the answer, gets the first answer
// back, and the balance moves once.
//
// The example runs against the server of IDEMKIT_POSTGRES_URL, as the
// tests do (scripts/with-postgres.sh); without one it is skipped.
func Example_adoptExistingSchema() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("IDEMKIT_POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// The server's own tables, example_accounts (alice at 0) and
	// example_transfers; a real server has them already.
	dropTables, err := exampleTables(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	defer dropTables()

	// idemkit's table goes beside them.
	store, err := postgres.New(pool, &postgres.Options{TablePrefix: "example_"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "v1"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "deposit", Description: "Add an amount to an account."}, store,
		depositHandler("example_accounts", "example_transfers", nil), idem.OpID())

	// A client deposits 10 and sends the same call again.
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	first, again, err := idemtest.SendTwice(ctx, cs, &mcp.CallToolParams{Name: "deposit",
		Arguments: map[string]any{"account": "alice", "amount": 10, "op_id": "deposit-1"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("first call: %s (replayed: %v)\n", text(first), replayed(first))
	fmt.Printf("repeat: %s (replayed: %v)\n", text(again), replayed(again))

	var balance, transfers int64
	if err := pool.QueryRow(ctx, "SELECT balance FROM example_accounts WHERE id = 'alice'").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM example_transfers").Scan(&transfers); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("alice's balance: %d, transfers: %d\n", balance, transfers)
	// Output:
	// first call: balance 10 (replayed: false)
	// repeat: balance 10 (replayed: true)
	// alice's balance: 10, transfers: 1
}

// exampleTables makes the example's tables afresh (whatever a run that did
// not finish left): the bank's, with alice at 0, and no idemkit table yet.
// drop removes them, idemkit's too.
func exampleTables(ctx context.Context, pool *pgxpool.Pool) (drop func(), err error) {
	drop = func() {
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS example_transfers, example_accounts, example_idem_docs; DROP SEQUENCE IF EXISTS example_idem_docs_version_seq"); err != nil {
			log.Print(err)
		}
	}
	drop()
	for _, stmt := range bankSchema("example_accounts", "example_transfers") {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return nil, err
		}
	}
	return drop, nil
}

type depositIn struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Note    string `json:"note,omitempty"`
	OpID    string `json:"op_id,omitempty"`
}

type depositOut struct {
	Balance int64 `json:"balance"`
}

// depositHandler records a transfer and adds it to the account's balance, in
// the existing tables accounts(id, balance, version) and transfers(id,
// account, amount). The transfer is keyed by the op id (INSERT ... ON
// CONFLICT DO NOTHING) and the balance is updated only at the version read
// (UPDATE ... WHERE version = $n), the way the schema was written before
// idemkit. hook, if not nil, runs after the writes (tests use it to inject
// faults).
func depositHandler(accounts, transfers string, hook func(ctx context.Context, ptx pgx.Tx) error) idem.HandlerFor[depositIn, depositOut] {
	insert := fmt.Sprintf("INSERT INTO %s (id, account, amount) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING", transfers)
	read := fmt.Sprintf("SELECT balance, version FROM %s WHERE id = $1", accounts)
	update := fmt.Sprintf("UPDATE %s SET balance = $1, version = version + 1 WHERE id = $2 AND version = $3", accounts)
	return func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in depositIn) (*mcp.CallToolResult, depositOut, error) {
		var ptx pgx.Tx
		if !tx.As(&ptx) {
			return nil, depositOut{}, errors.New("deposit needs a PostgreSQL store")
		}
		if in.Amount <= 0 {
			// Written before the check on purpose: the rollback must
			// take the transfer row with it.
			if _, err := ptx.Exec(ctx, insert, in.OpID, in.Account, in.Amount); err != nil {
				return nil, depositOut{}, err
			}
			return nil, depositOut{}, errors.New("amount must be positive")
		}
		tag, err := ptx.Exec(ctx, insert, in.OpID, in.Account, in.Amount)
		if err != nil {
			return nil, depositOut{}, err
		}
		var balance, version int64
		err = ptx.QueryRow(ctx, read, in.Account).Scan(&balance, &version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, depositOut{}, err
		}
		if tag.RowsAffected() == 1 && err == nil {
			balance += in.Amount
			tag, err := ptx.Exec(ctx, update, balance, in.Account, version)
			if err != nil {
				return nil, depositOut{}, err
			}
			if tag.RowsAffected() == 0 {
				return nil, depositOut{}, fmt.Errorf("account changed underneath: %w", idem.ErrConflict)
			}
		}
		if hook != nil {
			if err := hook(ctx, ptx); err != nil {
				return nil, depositOut{}, err
			}
		}
		text := fmt.Sprintf("balance %d", balance)
		if in.Note != "" {
			text += "; note: " + in.Note
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, depositOut{Balance: balance}, nil
	}
}

// bank is an existing schema (accounts, transfers) beside an idemkit store.
type bank struct {
	pool                *pgxpool.Pool
	store               *postgres.Store
	accounts, transfers string
}

// bankSchema is the statements that make the bank's tables accounts and
// transfers under the names given, with alice's account at 0.
func bankSchema(accounts, transfers string) []string {
	return []string{
		fmt.Sprintf(`CREATE TABLE %s (id text PRIMARY KEY, balance bigint NOT NULL, version bigint NOT NULL DEFAULT 1)`, accounts),
		// A deferred foreign key is checked at COMMIT, so a deposit to a
		// missing account fails in the commit itself.
		fmt.Sprintf(`CREATE TABLE %s (id text PRIMARY KEY, account text NOT NULL REFERENCES %s (id) DEFERRABLE INITIALLY DEFERRED, amount bigint NOT NULL)`, transfers, accounts),
		fmt.Sprintf(`INSERT INTO %s (id, balance) VALUES ('alice', 0)`, accounts),
	}
}

func newBank(t testing.TB, pool *pgxpool.Pool, opts *postgres.Options) *bank {
	t.Helper()
	b := &bank{pool: pool, store: newStore(t, pool, opts)}
	prefix := strings.TrimSuffix(strings.Trim(b.store.Table(), `"`), "idem_docs")
	b.accounts, b.transfers = prefix+"accounts", prefix+"transfers"
	ctx := context.Background()
	for _, stmt := range bankSchema(b.accounts, b.transfers) {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("creating the bank schema: %v", err)
		}
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), fmt.Sprintf("DROP TABLE IF EXISTS %s, %s CASCADE", b.transfers, b.accounts)); err != nil {
			t.Errorf("dropping the bank schema: %v", err)
		}
	})
	return b
}

func (b *bank) tool(t testing.TB, hook func(ctx context.Context, ptx pgx.Tx) error) *depositTool {
	return newDepositTool(t, b.store, depositHandler(b.accounts, b.transfers, hook), idem.OpID())
}

// depositTool is a deposit tool as a client sees it: registered with
// idem.AddTool on a server of its own (a process of its own), and called
// over an in-memory connection.
type depositTool struct{ cs *mcp.ClientSession }

func newDepositTool(t testing.TB, s idem.Store, h idem.HandlerFor[depositIn, depositOut], opts ...idem.Option) *depositTool {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "deposit"}, s, h, opts...)
	cs, err := idemtest.Connect(context.Background(), srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &depositTool{cs: cs}
}

// call calls a deposit tool.
func call(t testing.TB, tool *depositTool, in depositIn) *mcp.CallToolResult {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal(b, &args); err != nil {
		t.Fatal(err)
	}
	res, err := tool.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "deposit", Arguments: args})
	if err != nil {
		t.Errorf("deposit: %v", err)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
	}
	return res
}

// state is what the bank's tables and the op record hold for one op id.
type state struct {
	balance   int64 // alice's
	transfers int   // rows with this id
	opRecord  bool
}

func (b *bank) state(t testing.TB, opID string) state {
	t.Helper()
	ctx := context.Background()
	var s state
	if err := b.pool.QueryRow(ctx, fmt.Sprintf("SELECT balance FROM %s WHERE id = 'alice'", b.accounts)).Scan(&s.balance); err != nil {
		t.Fatalf("reading the balance: %v", err)
	}
	if err := b.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE id = $1", b.transfers), opID).Scan(&s.transfers); err != nil {
		t.Fatalf("counting transfers: %v", err)
	}
	_, err := oprecord.Lookup(ctx, b.store, "", "deposit", opID)
	switch {
	case err == nil:
		s.opRecord = true
	case !errors.Is(err, idem.ErrNotFound):
		t.Fatalf("reading the op record: %v", err)
	}
	return s
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func replayed(res *mcp.CallToolResult) bool {
	v, _ := res.Meta[idem.MetaReplayed].(bool)
	return v
}

// TestAdoptExistingSchema: the example's own tables and the op record commit
// together, and roll back together whichever of them fails.
func TestAdoptExistingSchema(t *testing.T) {
	pool := newPool(t, 4)
	b := newBank(t, pool, &postgres.Options{MaxDocumentBytes: 4096})
	tool := b.tool(t, nil)

	t.Run("CommitTogether", func(t *testing.T) {
		res := call(t, tool, depositIn{Account: "alice", Amount: 10, OpID: "d1"})
		if res.IsError || text(res) != "balance 10" {
			t.Fatalf("first call: %q (error %v)", text(res), res.IsError)
		}
		if s := b.state(t, "d1"); s != (state{balance: 10, transfers: 1, opRecord: true}) {
			t.Fatalf("after the first call: %+v, want balance 10, one transfer, an op record", s)
		}
		again := call(t, tool, depositIn{Account: "alice", Amount: 10, OpID: "d1"})
		if again.IsError || !replayed(again) || text(again) != "balance 10" {
			t.Fatalf("repeat: %q replayed=%v, want the stored result replayed", text(again), replayed(again))
		}
		if s := b.state(t, "d1"); s.balance != 10 || s.transfers != 1 {
			t.Fatalf("after the repeat: %+v, want nothing changed", s)
		}
	})

	t.Run("HandlerErrorRollsBackBoth", func(t *testing.T) {
		res := call(t, tool, depositIn{Account: "alice", Amount: -5, OpID: "d2"})
		if !res.IsError {
			t.Fatalf("a failing handler's call succeeded: %q", text(res))
		}
		if s := b.state(t, "d2"); s != (state{balance: 10}) {
			t.Fatalf("after a failed handler: %+v, want its transfer row rolled back and no op record", s)
		}
	})

	t.Run("OpRecordFailureRollsBackTable", func(t *testing.T) {
		// The result is over the store's 4 KiB limit, so creating the op
		// record fails after the handler wrote its tables.
		res := call(t, tool, depositIn{Account: "alice", Amount: 5, OpID: "d3", Note: strings.Repeat("n", 5000)})
		if !res.IsError {
			t.Fatalf("a call whose op record cannot be stored succeeded: %.40q", text(res))
		}
		if s := b.state(t, "d3"); s != (state{balance: 10}) {
			t.Fatalf("after the op record failed: %+v, want the handler's writes rolled back", s)
		}
	})

	t.Run("CommitFailureRollsBackBoth", func(t *testing.T) {
		// The deferred foreign key fails in the COMMIT, which went out
		// with the op record's insert.
		res := call(t, tool, depositIn{Account: "nobody", Amount: 5, OpID: "d4"})
		if !res.IsError {
			t.Fatalf("a call whose commit fails succeeded: %q", text(res))
		}
		if s := b.state(t, "d4"); s != (state{balance: 10}) {
			t.Fatalf("after the commit failed: %+v, want no transfer and no op record", s)
		}
		// Nothing was kept, so the same op id runs again once the account
		// exists.
		if _, err := pool.Exec(context.Background(), fmt.Sprintf("INSERT INTO %s (id, balance) VALUES ('nobody', 0)", b.accounts)); err != nil {
			t.Fatal(err)
		}
		if res := call(t, tool, depositIn{Account: "nobody", Amount: 5, OpID: "d4"}); res.IsError || replayed(res) {
			t.Fatalf("retry after the account exists: %q replayed=%v, want a fresh success", text(res), replayed(res))
		}
		if s := b.state(t, "d4"); s.transfers != 1 || !s.opRecord {
			t.Fatalf("after the retry: %+v, want one transfer and an op record", s)
		}
	})
}
