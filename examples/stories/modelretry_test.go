package main

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemtest"
)

// TestModelRetry plays a model after a lost answer on every write tool:
// the answer is lost after the commit, and the model sends the call again
// on a new connection with an op id it minted anew and, where a model
// plausibly rewords it, a regenerated value that is not part of the
// record's key (a reproducer's note). Nothing stored or posted changes:
// each tool is keyed by arguments the model already has (slug, handle).
func TestModelRetry(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		const slug = "model-retry"
		regenerated := map[string]map[string]any{
			"report_reproduction": {"note": "reproduced it on Firefox 140"},
		}
		var cs *mcp.ClientSession
		for i, w := range writes(slug) {
			drop := &idemtest.Dropper{Tool: w.tool}
			lost, err := idemtest.Connect(e.ctx, e.srv, drop.Wrap)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lost.CallTool(e.ctx, &mcp.CallToolParams{Name: w.tool, Arguments: withOpID(w.args, fmt.Sprintf("op-%d", i))}); err == nil || drop.Dropped() != 1 {
				t.Fatalf("%s: the answer was not lost (%v)", w.tool, err)
			}
			lost.Close()
			cs = e.connect(t)
			committed := e.snapshot(t, cs, slug)
			retry := withOpID(w.args, fmt.Sprintf("op-minted-again-%d", i))
			for k, v := range regenerated[w.tool] {
				retry[k] = v
			}
			ok(t, e.ctx, cs, w.tool, retry)
			sameSnapshot(t, w.tool+" retried by a model with a new op id", committed, e.snapshot(t, cs, slug))
		}
		e.checkOnce(t, cs, slug)
	})
}
