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
	"errors"
	"fmt"
	"io"
	"os"
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
	expenseSchema = exserve.InputSchema[Expense](func(p map[string]*jsonschema.Schema) {
		p["amount_cents"].Minimum = new(1.0)
	})
	budgetSchema = exserve.InputSchema[Budget](func(p map[string]*jsonschema.Schema) {
		p["month"].Pattern = monthPattern
	})
)

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
	c, status := f.Start(fs, args, nil)
	if c == nil {
		return status
	}
	defer c.Close()
	srv := newServer(c.Store, f.TTL, f.MaxStoredBytes)

	if f.Demo {
		return c.Exit(runDemo(c.Ctx, srv, c.Store, stdout))
	}
	return c.Exit(c.Run(srv))
}

// runDemo is the demo of exserve.QuickstartDemo, with the go-sdk's client
// in this process: an app whose first response is lost recovers it with
// get_operation and a retry, and each write happens once.
func runDemo(ctx context.Context, srv *mcp.Server, s idem.Store, w io.Writer) error {
	d := &idemtest.Dropper{Tool: "add_expense"}
	connect := func(ctx context.Context, lossy bool) (exserve.DemoClient, error) {
		wrap := d.Wrap
		if !lossy {
			wrap = nil
		}
		cs, err := idemtest.Connect(ctx, srv, wrap)
		if err != nil {
			return nil, err
		}
		return demoClient{cs}, nil
	}
	return exserve.QuickstartDemo(ctx, w, s, connect, d.Dropped)
}

// demoClient is a go-sdk client session as the demo calls it.
type demoClient struct{ *mcp.ClientSession }

func (c demoClient) Call(ctx context.Context, tool string, args map[string]any) (any, map[string]any, error) {
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, nil, err
	}
	return res.StructuredContent, res.Meta, nil
}
