package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// runDemo plays an app whose first response is lost, as the quickstart's
// -demo does, with mcp-go's own client: it sends add_expense, loses the
// answer after the server committed, reconnects, asks get_operation, and
// sends it again with the same op id. Then it sets a month's budget twice.
// Each step prints what was sent, what came back and why: the quickstart's
// lines, word for word.
func runDemo(ctx context.Context, srv *server.MCPServer, s idem.Store, w io.Writer) error {
	opID := "demo-" + rand.Text()[:10]
	args := map[string]any{"amount_cents": 1250, "note": "lunch", "op_id": opID}
	d := &idemtest.HTTPDropper{Next: server.NewStreamableHTTPServer(srv, server.WithStateLess(true))}
	hs := httptest.NewServer(d) // on loopback, as -http serves it
	defer hs.Close()
	d.Arm("add_expense")
	cl, err := connect(ctx, hs.URL+"/mcp")
	if err != nil {
		return err
	}
	_, err = cl.CallTool(ctx, callOf("add_expense", args))
	cl.Close()
	if err == nil || d.Dropped() != 1 {
		return fmt.Errorf("demo: the first response was not lost (%v)", err)
	}
	fmt.Fprintf(w, "1. add_expense %s -> no answer: the server committed the expense, then the connection closed before the response arrived. The app cannot tell whether it was saved.\n", jsonOf(args, ""))

	cl, err = connect(ctx, hs.URL+"/mcp") // reconnect, as the app would
	if err != nil {
		return err
	}
	defer cl.Close()
	q := map[string]any{"tool": "add_expense", "op_id": opID}
	st, err := cl.CallTool(ctx, callOf("get_operation", q))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "2. get_operation %s -> status %s, output %s: the op record was saved with the expense, so the lost call did go through.\n",
		jsonOf(q, ""), jsonOf(st.StructuredContent, "status"), jsonOf(st.StructuredContent, "output"))

	res, err := cl.CallTool(ctx, callOf("add_expense", args))
	if err != nil {
		return err
	}
	var replayed any
	if res.Meta != nil {
		replayed = res.Meta.AdditionalFields[idem.MetaReplayed]
	}
	fmt.Fprintf(w, "3. add_expense again, the same arguments and op_id -> %s with _meta %s=%v: the stored result of step 1, answered again; nothing was added.\n",
		jsonOf(res.StructuredContent, ""), idem.MetaReplayed, replayed)

	budget := map[string]any{"month": "2026-11", "amount_cents": 40000}
	for i := range 2 {
		res, err = cl.CallTool(ctx, callOf("set_budget", budget))
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

// callOf is a tools/call request of tool with args.
func callOf(tool string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return req
}

// connect starts and initializes an mcp-go client of the server at url.
func connect(ctx context.Context, url string) (*client.Client, error) {
	cl, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return nil, err
	}
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "quickstart-demo", Version: "v0"}
	if _, err := cl.Initialize(ctx, req); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}
