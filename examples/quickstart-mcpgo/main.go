// Command quickstart-mcpgo is the quickstart (examples/quickstart) written
// on mark3labs/mcp-go instead of the official go-sdk: the same two tools,
// registered with idem/mcpgo, the same flags and the same -demo.
//
//	go run ./examples/quickstart-mcpgo                            # stdio, for a local client
//	go run ./examples/quickstart-mcpgo -http 127.0.0.1:8080       # streamable HTTP at http://127.0.0.1:8080/mcp
//	go run ./examples/quickstart-mcpgo -http 127.0.0.1:8080 -user TOKEN=alice
//	go run ./examples/quickstart-mcpgo -demo                      # call the tools twice and show what happened
//
// It takes the flags every example takes (docs/production.md) and serves as
// the quickstart does. Over HTTP with -user, a call's scope is the user of
// its bearer token: mcp-go has no authenticated user of its own, so the
// server's HTTP context function puts the user the token check found in
// the call's context, and mcpgo.Scope reads it there. What its wire output
// differs in from the quickstart's: docs/protect.md ("mcp-go").
//
// Its tools are the quickstart's:
//   - add_expense appends an expense under a server-made id, and takes an
//     op id that the app mints before the first attempt: a tool for apps
//     (idem.ForApps).
//   - set_budget replaces the budget of a month: the month is the record key.
//   - get_operation tells whether an op id committed, for lost responses.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
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

// The tools' input schemas, the quickstart's: inferred from their
// arguments, with the limits the arguments' descriptions state, so that a
// client reads them and the middleware refuses a value outside them
// (invalid_arguments) before the handler runs.
var (
	expenseSchema = inputSchema[Expense](func(p map[string]*jsonschema.Schema) {
		p["amount_cents"].Minimum = new(1.0)
	})
	budgetSchema = inputSchema[Budget](func(p map[string]*jsonschema.Schema) {
		p["month"].Pattern = monthPattern
	})
)

// inputSchema is the input schema inferred from T, its properties changed
// by edit (exserve.InputSchema), as JSON for mcp.WithRawInputSchema.
func inputSchema[T any](edit func(map[string]*jsonschema.Schema)) json.RawMessage {
	b, err := json.Marshal(exserve.InputSchema[T](edit))
	if err != nil {
		panic(err)
	}
	return b
}

type ledger struct {
	TotalCents int64 `json:"total_cents"`
	Count      int64 `json:"count"`
}

var ledgerKey = idem.Key{Collection: "ledger", ID: "main"}

// addExpense appends an expense with a server-made id and bumps the total:
// the op id the middleware checks is what makes a repeat harmless.
func addExpense(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in Expense) (*mcp.CallToolResult, Added, error) {
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
func setBudget(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in Budget) (*mcp.CallToolResult, Budget, error) {
	if _, err := time.Parse("2006-01", in.Month); err != nil {
		return nil, Budget{}, errors.New("month must be YYYY-MM")
	}
	return nil, in, tx.Put(ctx, idem.Key{Collection: "budgets", ID: in.Month}, in)
}

// userKey is where withUser keeps the caller's user in a call's context.
type userKey struct{}

// withUser is the HTTP context function: it puts the user whose bearer
// token the request carried (exserve's check found it) in the call's
// context.
func withUser(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, userKey{}, exserve.User(r.Context()))
}

// scope is the op's scope: the caller's user over HTTP with -user, ""
// otherwise (stdio, or HTTP without -user, where all callers are one).
func scope(ctx context.Context, _ mcp.CallToolRequest) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// NewServer returns the quickstart server on store s, which keeps each
// answer for the Guard's default TTL, 24 hours.
func NewServer(s idem.Store) *server.MCPServer { return newServer(s, 0, 0) }

// newServer is NewServer keeping each answer for ttl (0: the default) and
// at most maxStored bytes of one user's answers at once (0: no bound), as
// -ttl and -max-stored-bytes say.
func newServer(s idem.Store, ttl time.Duration, maxStored int64) *server.MCPServer {
	srv := server.NewMCPServer("idemkit-quickstart", "v0.1.0")
	// The server's settings, once: every tool and get_operation take them.
	guard := mcpgo.New(s, &idem.Options{TTL: ttl, MaxStoredBytes: maxStored, Tracer: otelidem.NewTracer(nil)}, &mcpgo.Options{Scope: scope})
	// Both tools touch this server's store alone (openWorldHint: false;
	// mcp.NewTool would say true); set_budget replaces what was there,
	// add_expense only adds. add_expense is for apps (its description then
	// opens "For apps, not models."): a model that lost the answer would
	// call again under a new op id and record the expense twice.
	mcpgo.AddTool(srv, mcp.NewTool("add_expense", mcp.WithDescription("Record an expense and return its id and the new total. "+
		"The app mints op_id when the user records the expense and resends it on every retry."),
		mcp.WithRawInputSchema(expenseSchema),
		mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false)),
		guard, addExpense, idem.RequireOpID(), idem.ForApps())
	mcpgo.AddTool(srv, mcp.NewTool("set_budget", mcp.WithDescription("Set the budget of a month, replacing any earlier one."),
		mcp.WithRawInputSchema(budgetSchema),
		mcp.WithDestructiveHintAnnotation(true), mcp.WithOpenWorldHintAnnotation(false)),
		guard, setBudget, idem.RecordKeys("month"))
	mcpgo.RegisterStatusTool(srv, guard)
	return srv
}

// serving is srv as exserve runs it: stdio, or the stateless streamable
// HTTP handler whose calls carry their user.
func serving(srv *server.MCPServer, log *slog.Logger) exserve.Server {
	return exserve.Server{
		Stdio: func(ctx context.Context) error {
			s := server.NewStdioServer(srv)
			s.SetErrorLogger(slog.NewLogLogger(log.Handler(), slog.LevelError))
			return s.Listen(ctx, os.Stdin, os.Stdout)
		},
		HTTP: server.NewStreamableHTTPServer(srv, server.WithStateLess(true), server.WithHTTPContextFunc(withUser)),
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status, so that the deferred
// closes run before the process exits.
func run(args []string, stdout, stderr io.Writer) int {
	var f exserve.Flags
	fs := f.FlagSet("quickstart-mcpgo", stderr, "sqlite:idemkit-quickstart.db",
		"quickstart-mcpgo -demo",
		"quickstart-mcpgo -http 127.0.0.1:8080",
		"quickstart-mcpgo -http 127.0.0.1:8080 -user TOKEN=alice -store memory:")
	fs.Func("db", "the SQLite database file: the same as -store sqlite:PATH (as the quickstart takes it)", func(path string) error {
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
	return c.Exit(c.RunServer(serving(srv, c.Log)))
}
