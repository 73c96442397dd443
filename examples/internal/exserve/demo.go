package exserve

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"

	"github.com/idemkit/sdk/idem"
)

// A DemoClient is a demo's connection to its server, through the client
// of the server's MCP library.
type DemoClient interface {
	// Call calls tool with args and returns the answer's structured
	// content and its _meta.
	Call(ctx context.Context, tool string, args map[string]any) (content any, meta map[string]any, err error)
	Close() error
}

// QuickstartDemo is the -demo of both quickstarts, whichever MCP library
// serves them: it plays an app whose first response is lost. It sends
// add_expense on a connection from connect(ctx, true), which loses the
// answer after the server committed (dropped then counts 1); reconnects
// with connect(ctx, false), asks get_operation, and sends add_expense
// again with the same op id. Then it sets a month's budget twice, and
// reads the quickstart's records in s. Each step prints to w what was
// sent, what came back and why.
func QuickstartDemo(ctx context.Context, w io.Writer, s idem.Store, connect func(ctx context.Context, lossy bool) (DemoClient, error), dropped func() int) error {
	opID := "demo-" + rand.Text()[:10]
	args := map[string]any{"amount_cents": 1250, "note": "lunch", "op_id": opID}
	cl, err := connect(ctx, true)
	if err != nil {
		return err
	}
	_, _, err = cl.Call(ctx, "add_expense", args)
	cl.Close()
	if err == nil || dropped() != 1 {
		return fmt.Errorf("demo: the first response was not lost (%v)", err)
	}
	fmt.Fprintf(w, "1. add_expense %s -> no answer: the server committed the expense, then the connection closed before the response arrived. The app cannot tell whether it was saved.\n", JSONOf(args, ""))

	cl, err = connect(ctx, false) // reconnect, as the app would
	if err != nil {
		return err
	}
	defer cl.Close()
	q := map[string]any{"tool": "add_expense", "op_id": opID}
	st, _, err := cl.Call(ctx, "get_operation", q)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "2. get_operation %s -> status %s, output %s: the op record was saved with the expense, so the lost call did go through.\n",
		JSONOf(q, ""), JSONOf(st, "status"), JSONOf(st, "output"))

	res, meta, err := cl.Call(ctx, "add_expense", args)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "3. add_expense again, the same arguments and op_id -> %s with _meta %s=%v: the stored result of step 1, answered again; nothing was added.\n",
		JSONOf(res, ""), idem.MetaReplayed, meta[idem.MetaReplayed])

	budget := map[string]any{"month": "2026-11", "amount_cents": 40000}
	for i := range 2 {
		res, _, err = cl.Call(ctx, "set_budget", budget)
		if err != nil {
			return err
		}
		why := "writes the budget record of 2026-11."
		if i == 1 {
			why = "the month is the record key, so the repeat replaced the same record instead of adding one."
		}
		fmt.Fprintf(w, "%d. set_budget %s (no op_id) -> %s: %s\n", 4+i, JSONOf(budget, ""), JSONOf(res, ""), why)
	}

	// The quickstart's records: its ledger, and the month's budget.
	var l struct {
		TotalCents int64 `json:"total_cents"`
		Count      int64 `json:"count"`
	}
	var b struct {
		AmountCents int64 `json:"amount_cents"`
	}
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, idem.Key{Collection: "ledger", ID: "main"}, &l); err != nil {
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

// JSONOf returns v, or its member field, as JSON (a string member as is).
func JSONOf(v any, field string) string {
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
