package idemtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

type expense struct {
	Cents int `json:"cents"`
}

type total struct {
	Cents int `json:"cents"`
}

var totalKey = idem.Key{Collection: "totals", ID: "main"}

// addToTotal adds an expense to the total: unsafe to repeat by itself, so
// it is served with a required op id.
func addToTotal(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in expense) (*mcp.CallToolResult, total, error) {
	var t total
	v, err := tx.Get(ctx, totalKey, &t)
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		return nil, t, err
	}
	t.Cents += in.Cents
	if v == 0 {
		return nil, t, tx.Create(ctx, totalKey, t)
	}
	return nil, t, tx.Update(ctx, totalKey, v, t)
}

// readTotal reads the total in tx; none is a total of 0.
func readTotal(ctx context.Context, tx idem.Tx) (total, error) {
	var t total
	if _, err := tx.Get(ctx, totalKey, &t); err != nil && !errors.Is(err, idem.ErrNotFound) {
		return t, err
	}
	return t, nil
}

// newLedger returns a fresh Subject: a server whose add_expense adds to a
// total under a required op id, on a new memory store, and the total as
// its state.
func newLedger(ctx context.Context) (*idemtest.Subject, error) {
	s := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "ledger", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add_expense"}, s, addToTotal, idem.RequireOpID())
	return &idemtest.Subject{Server: srv, State: func(ctx context.Context) (any, error) {
		var t total
		err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) (err error) {
			t, err = readTotal(ctx, tx)
			return err
		})
		return t, err
	}}, nil
}

func addExpense(cents int, opID string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "add_expense", Arguments: map[string]any{"cents": cents, "op_id": opID}}
}

// An app replays its queue after a reconnect: the calls may arrive in any
// order, and one of them twice. Every order must end with the same total.
func ExampleAllOrders() {
	err := idemtest.AllOrders(context.Background(), newLedger,
		addExpense(500, "op-1"),
		addExpense(700, "op-2"),
		addExpense(500, "op-1"), // the first, sent again
	)
	fmt.Println("orders differ:", err)
	// Output:
	// orders differ: <nil>
}

// A double tap: five identical calls at once. The tool runs once, the
// others get its stored answer, and the total counts the expense once.
func ExampleConcurrently() {
	call := addExpense(500, "op-1")
	r, err := idemtest.Concurrently(context.Background(), newLedger, 5, func(int) *mcp.CallToolParams { return call })
	fmt.Println("error:", err)
	fmt.Printf("ran %d, replayed %d, refused %d\n", r.Ran, r.Replayed, r.Refused)
	fmt.Println("state:", string(r.State))
	// Output:
	// error: <nil>
	// ran 1, replayed 4, refused 0
	// state: {"cents":500}
}

// A model lost the answer to add_expense after the server committed, and
// called it again. With the same op id the expense counts once; under an
// op id the model minted anew, twice: the tool needs a record key the
// model already has.
func ExampleModelRetries() {
	retries, err := idemtest.ModelRetries(context.Background(), newLedger, addExpense(500, "op-1"))
	for _, r := range retries {
		fmt.Printf("%s: %s -> %s\n", r.Kind, r.Before, r.After)
	}
	fmt.Println("moved the state:", err != nil)
	// Output:
	// same arguments: {"cents":500} -> {"cents":500}
	// fresh op id: {"cents":500} -> {"cents":1000}
	// moved the state: true
}

// A server built anew for every request over stateless HTTP, its tools
// guarded by one line (trackerServer). The answer to a create is lost
// after the create ran; the retry on a new connection gets the first
// answer back instead of creating again.
func ExampleHTTPServer() {
	tr := &tracker{}
	guard := idem.New(memory.New(nil), nil) // once, outside the per-request function
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return trackerServer(tr, guard) },
		&mcp.StreamableHTTPOptions{Stateless: true})

	hs := idemtest.NewHTTPServer(handler)
	defer hs.Close()
	res, err := hs.DropAndRetry(context.Background(),
		&mcp.CallToolParams{Name: "create_issue", Arguments: map[string]any{"title": "crash on start", "op_id": "op-1"}})
	fmt.Println("error:", err)
	fmt.Println("answers lost:", hs.Dropper.Dropped())
	fmt.Println("issues created:", tr.created())
	fmt.Println("retry replayed:", res.Meta[idem.MetaReplayed])
	// Output:
	// error: <nil>
	// answers lost: 1
	// issues created: 1
	// retry replayed: true
}
