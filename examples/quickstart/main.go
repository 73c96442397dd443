// Command quickstart is a small MCP server whose write tools are safe to call
// twice, on the embedded SQLite store.
//
//	go run ./examples/quickstart                  # streamable HTTP on 127.0.0.1:8080
//	go run ./examples/quickstart -stdio           # stdio, for a local client
//	go run ./examples/quickstart -demo            # call the tools twice and show what happened
//
// Its tools:
//   - add_expense appends an expense under a server-made id: unsafe to repeat
//     by itself, so it takes an op id that the app mints before the first
//     attempt. A repeat returns the first answer; nothing is added twice.
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
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/sqlite"
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

// NewServer returns the quickstart server on store s.
func NewServer(s idem.Store) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-quickstart", Version: "v0.1.0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add_expense", Description: "Record an expense and return its id and the new total."},
		s, addExpense, idem.RequireOpID())
	idem.AddTool(srv, &mcp.Tool{Name: "set_budget", Description: "Set the budget of a month, replacing any earlier one."},
		s, setBudget, idem.Keys("month"))
	idem.RegisterStatusTool(srv, s)
	return srv
}

func main() {
	db := flag.String("db", "idemkit-quickstart.db", "SQLite database file")
	addr := flag.String("http", "127.0.0.1:8080", "serve streamable HTTP on this address")
	stdio := flag.Bool("stdio", false, "serve on stdin/stdout instead of HTTP")
	demo := flag.Bool("demo", false, "call the tools twice, losing one response, and print what happened")
	flag.Parse()

	s, err := sqlite.Open(*db, nil)
	if err != nil {
		log.Fatalf("opening %s: %v", *db, err)
	}
	defer s.Close()
	srv := NewServer(s)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	switch {
	case *demo:
		err = runDemo(ctx, srv, os.Stdout)
	case *stdio:
		err = srv.Run(ctx, &mcp.StdioTransport{})
	default:
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		hs := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			hs.Close()
		}()
		log.Printf("quickstart: MCP over streamable HTTP at http://%s (database %s)", *addr, *db)
		if err = hs.ListenAndServe(); errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	if err != nil {
		log.Fatal(err)
	}
}

// runDemo plays an app whose first response is lost: it sends add_expense,
// loses the answer after the server committed, reconnects and sends it again
// with the same op id.
func runDemo(ctx context.Context, srv *mcp.Server, w *os.File) error {
	opID := "demo-" + rand.Text()[:10]
	args := map[string]any{"amount_cents": 1250, "note": "lunch", "op_id": opID}
	d := &idemtest.Dropper{Tool: "add_expense"}
	cs, err := idemtest.Connect(ctx, srv, d.Wrap)
	if err != nil {
		return err
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_expense", Arguments: args})
	cs.Close()
	fmt.Fprintf(w, "1. add_expense %s: response lost (%v)\n", opID, err != nil)

	cs, err = idemtest.Connect(ctx, srv, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	st, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_operation", Arguments: map[string]any{"tool": "add_expense", "op_id": opID}})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "2. get_operation: %s\n", jsonOf(st.StructuredContent, "status"))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_expense", Arguments: args})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "3. retry with the same op id: %s replayed=%v\n", jsonOf(res.StructuredContent, ""), res.Meta[idem.MetaReplayed])
	for i := 0; i < 2; i++ {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "set_budget", Arguments: map[string]any{"month": "2026-11", "amount_cents": 40000}})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%d. set_budget 2026-11 (keyed by month): %s\n", 4+i, jsonOf(res.StructuredContent, ""))
	}
	return nil
}

func jsonOf(v any, field string) string {
	b, _ := json.Marshal(v)
	if field == "" {
		return string(b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return fmt.Sprint(m[field])
}
