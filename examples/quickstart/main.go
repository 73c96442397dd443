// Command quickstart is a small MCP server whose write tools are safe to call
// twice, on the embedded SQLite store.
//
//	go run ./examples/quickstart                            # stdio, for a local client
//	go run ./examples/quickstart -http 127.0.0.1:8080       # streamable HTTP at http://127.0.0.1:8080/mcp
//	go run ./examples/quickstart -http 127.0.0.1:8080 -user TOKEN=alice
//	go run ./examples/quickstart -demo                      # call the tools twice and show what happened
//
// It takes the flags every example takes (docs/production.md). Over HTTP it
// logs the URL it serves once the port is bound, answers MCP at /mcp only
// (other paths get a 404 that names /mcp), and on SIGINT or SIGTERM answers
// the calls in progress, closes the store and exits with status 0. The store
// is SQLite idemkit-quickstart.db in the current folder (-store to choose,
// or -db PATH as before); -demo uses a fresh temporary one unless one is
// given.
//
// Its tools:
//   - add_expense appends an expense under a server-made id: unsafe to repeat
//     by itself, so it takes an op id that the app mints before the first
//     attempt. A repeat returns the first answer; nothing is added twice. It
//     is a tool for apps (idem.ForApps): an expense has no argument a model
//     already has that could name it, and a model that lost the answer may
//     call again under a new op id, so its description opens "For apps, not
//     models." and idem audit reports it as such (op_id_only_for_apps).
//   - set_budget replaces the budget of a month: the month is the record key,
//     so a repeat writes the same record.
//   - get_operation tells whether an op id committed, for lost responses.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/otelidem"
)

// Expense is one recorded expense.
type Expense struct {
	AmountCents int64  `json:"amount_cents" jsonschema:"the amount in cents, above zero"`
	Note        string `json:"note,omitempty" jsonschema:"what it was for"`
}

// Added is the answer of add_expense.
type Added struct {
	ID         string `json:"id"`
	TotalCents int64  `json:"total_cents"`
}

// Budget is a month's budget.
type Budget struct {
	Month       string `json:"month" jsonschema:"the month, as YYYY-MM"`
	AmountCents int64  `json:"amount_cents" jsonschema:"the budget in cents"`
}

// monthPattern is a month as YYYY-MM, what setBudget reads.
const monthPattern = `^[0-9]{4}-(0[1-9]|1[0-2])$`

// The tools' input schemas: inferred from their arguments, with the limits
// the arguments' descriptions state, so that a client reads them and the
// middleware refuses a value outside them (invalid_arguments) before the
// handler runs.
var (
	expenseSchema = inputSchema[Expense](func(p map[string]*jsonschema.Schema) {
		p["amount_cents"].Minimum = new(1.0)
	})
	budgetSchema = inputSchema[Budget](func(p map[string]*jsonschema.Schema) {
		p["month"].Pattern = monthPattern
	})
)

// inputSchema is the input schema inferred from T, its properties changed
// by edit.
func inputSchema[T any](edit func(map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	edit(s.Properties)
	return s
}

type ledger struct {
	TotalCents int64 `json:"total_cents"`
	Count      int64 `json:"count"`
}

var ledgerKey = idem.Key{Collection: "ledger", ID: "main"}

// addExpense appends an expense with a server-made id and bumps the total:
// the op id the middleware checks is what makes a repeat harmless.
func addExpense(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Expense) (*mcp.CallToolResult, Added, error) {
	if in.AmountCents <= 0 {
		return nil, Added{}, errors.New("amount_cents must be above zero")
	}
	var l ledger
	v, err := tx.Get(ctx, ledgerKey, &l)
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		return nil, Added{}, err
	}
	l.TotalCents += in.AmountCents
	l.Count++
	if v == 0 {
		err = tx.Create(ctx, ledgerKey, l)
	} else {
		err = tx.Update(ctx, ledgerKey, v, l)
	}
	if err != nil {
		return nil, Added{}, err
	}
	id := fmt.Sprintf("exp-%d-%s", l.Count, rand.Text()[:6])
	if err := tx.Create(ctx, idem.Key{Collection: "expenses", ID: id}, in); err != nil {
		return nil, Added{}, err
	}
	return nil, Added{ID: id, TotalCents: l.TotalCents}, nil
}

// setBudget replaces a month's budget: keyed by the month, so a repeat
// writes the same record.
func setBudget(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Budget) (*mcp.CallToolResult, Budget, error) {
	if _, err := time.Parse("2006-01", in.Month); err != nil {
		return nil, Budget{}, errors.New("month must be YYYY-MM")
	}
	return nil, in, tx.Put(ctx, idem.Key{Collection: "budgets", ID: in.Month}, in)
}

// NewServer returns the quickstart server on store s, which keeps each
// answer for the Guard's default TTL, 24 hours.
func NewServer(s idem.Store) *mcp.Server { return newServer(s, 0, 0) }

// newServer is NewServer keeping each answer for ttl (0: the default) and
// at most maxStored bytes of one user's answers at once (0: no bound), as
// -ttl and -max-stored-bytes say.
func newServer(s idem.Store, ttl time.Duration, maxStored int64) *mcp.Server {
	// The server's settings, once: every tool and get_operation take them.
	guard := idem.New(s, &idem.Options{TTL: ttl, MaxStoredBytes: maxStored, Tracer: otelidem.NewTracer(nil)})
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-quickstart", Version: "v0.1.0"}, nil)
	// Both tools touch this server's store alone (openWorldHint: false;
	// MCP reads an absent hint as true); set_budget replaces what was
	// there, add_expense only adds.
	no, yes := new(false), new(true)
	// add_expense is for apps (its description then opens "For apps, not
	// models."): a model that lost the answer would call again under a
	// new op id and record the expense twice.
	idem.AddTool(srv, &mcp.Tool{Name: "add_expense", Description: "Record an expense and return its id and the new total. " +
		"The app mints op_id when the user records the expense and resends it on every retry.",
		InputSchema: expenseSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}},
		guard, addExpense, idem.RequireOpID(), idem.ForApps())
	idem.AddTool(srv, &mcp.Tool{Name: "set_budget", Description: "Set the budget of a month, replacing any earlier one.",
		InputSchema: budgetSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes, OpenWorldHint: no}},
		guard, setBudget, idem.RecordKeys("month"))
	idem.RegisterStatusTool(srv, guard)
	return srv
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status, so that the deferred
// closes run before the process exits.
func run(args []string, stdout, stderr io.Writer) int {
	log := exserve.Logger(stderr, "quickstart")
	var f exserve.Flags
	fs := f.FlagSet("quickstart", stderr, "sqlite:idemkit-quickstart.db",
		"quickstart -demo",
		"quickstart -http 127.0.0.1:8080",
		"quickstart -http 127.0.0.1:8080 -user TOKEN=alice -store memory:")
	fs.Func("db", "the SQLite database file: the same as -store sqlite:PATH (kept from earlier versions)", func(path string) error {
		if path == "" {
			return errors.New("want a file path")
		}
		f.Store = "sqlite:" + path
		return nil
	})
	if err := f.Parse(fs, args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		log.Error(err.Error())
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, closeStore, err := f.OpenStore(ctx, log, "quickstart")
	if err != nil {
		log.Error("opening the store", "err", err)
		return 1
	}
	defer closeStore()
	srv := newServer(s, f.TTL, f.MaxStoredBytes)

	if f.Demo {
		err = runDemo(ctx, srv, s, stdout)
	} else {
		err = exserve.Run(ctx, stop, log, srv, &f)
	}
	if err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// runDemo plays an app whose first response is lost: it sends add_expense,
// loses the answer after the server committed, reconnects, asks
// get_operation, and sends it again with the same op id. Then it sets a
// month's budget twice. Each step prints what was sent, what came back and
// why.
func runDemo(ctx context.Context, srv *mcp.Server, s idem.Store, w io.Writer) error {
	opID := "demo-" + rand.Text()[:10]
	args := map[string]any{"amount_cents": 1250, "note": "lunch", "op_id": opID}
	d := &idemtest.Dropper{Tool: "add_expense"}
	cs, err := idemtest.Connect(ctx, srv, d.Wrap)
	if err != nil {
		return err
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_expense", Arguments: args})
	cs.Close()
	if err == nil || d.Dropped() != 1 {
		return fmt.Errorf("demo: the first response was not lost (%v)", err)
	}
	fmt.Fprintf(w, "1. add_expense %s -> no answer: the server committed the expense, then the connection closed before the response arrived. The app cannot tell whether it was saved.\n", jsonOf(args, ""))

	cs, err = idemtest.Connect(ctx, srv, nil) // reconnect, as the app would
	if err != nil {
		return err
	}
	defer cs.Close()
	q := map[string]any{"tool": "add_expense", "op_id": opID}
	st, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_operation", Arguments: q})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "2. get_operation %s -> status %s, output %s: the op record was saved with the expense, so the lost call did go through.\n",
		jsonOf(q, ""), jsonOf(st.StructuredContent, "status"), jsonOf(st.StructuredContent, "output"))

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_expense", Arguments: args})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "3. add_expense again, the same arguments and op_id -> %s with _meta %s=%v: the stored result of step 1, answered again; nothing was added.\n",
		jsonOf(res.StructuredContent, ""), idem.MetaReplayed, res.Meta[idem.MetaReplayed])

	budget := map[string]any{"month": "2026-11", "amount_cents": 40000}
	for i := range 2 {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "set_budget", Arguments: budget})
		if err != nil {
			return err
		}
		why := "writes the budget record of 2026-11."
		if i == 1 {
			why = "the month is the record key, so the repeat replaced the same record instead of adding one."
		}
		fmt.Fprintf(w, "%d. set_budget %s (no op_id) -> %s: %s\n", 4+i, jsonOf(budget, ""), jsonOf(res.StructuredContent, ""), why)
	}

	var l ledger
	var b Budget
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, ledgerKey, &l); err != nil {
			return err
		}
		_, err := tx.Get(ctx, idem.Key{Collection: "budgets", ID: "2026-11"}, &b)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "6. read from the database directly: expenses %d, total %d cents; one budget record for 2026-11, %d cents.\n", l.Count, l.TotalCents, b.AmountCents)
	fmt.Fprintln(w, "So: a response lost after the commit was recovered with get_operation and a retry under the same op_id, and each write happened once.")
	return nil
}

// jsonOf returns v, or its member field, as JSON (a string member as is).
func jsonOf(v any, field string) string {
	b, _ := json.Marshal(v)
	if field == "" {
		return string(b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if s, ok := m[field].(string); ok {
		return s
	}
	b, _ = json.Marshal(m[field])
	return string(b)
}
