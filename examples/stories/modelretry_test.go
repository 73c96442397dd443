package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// TestModelRetry plays a model after a lost answer on every write tool:
// the answer is lost after the commit, and the model sends the call again
// on a new connection with an op id it minted anew, then once more with
// the values a model plausibly regenerates (a reworded note or body).
// Nothing stored or posted changes: each tool is keyed by arguments the
// model already has (slug, handle), and edit_story's retry names the
// revision its first attempt was based on, which the story has moved past:
// the same body is answered, a reworded one refused.
func TestModelRetry(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		const slug = "model-retry"
		regenerated := map[string]map[string]any{
			"report_reproduction": {"note": "reproduced it on Firefox 140"},
			"edit_story":          {"body": "Reset, then sign in twice in under a minute."},
		}
		refused := map[string]bool{"edit_story": true}
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
			ok(t, e.ctx, cs, w.tool, withOpID(w.args, fmt.Sprintf("op-minted-again-%d", i)))
			sameSnapshot(t, w.tool+" retried by a model with a new op id", committed, e.snapshot(t, cs, slug))
			if regenerated[w.tool] == nil {
				continue
			}
			retry := withOpID(w.args, fmt.Sprintf("op-regenerated-%d", i))
			for k, v := range regenerated[w.tool] {
				retry[k] = v
			}
			if refused[w.tool] {
				res := call(t, e.ctx, cs, w.tool, retry)
				if !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeNotSaved) || !strings.Contains(text(res), "get_story") {
					t.Errorf("%s retried with regenerated values on the same revision: %v %s, want not_saved naming get_story", w.tool, res.Meta[idem.MetaError], text(res))
				}
			} else {
				ok(t, e.ctx, cs, w.tool, retry)
			}
			sameSnapshot(t, w.tool+" retried by a model with regenerated values", committed, e.snapshot(t, cs, slug))
		}
		e.checkOnce(t, cs, slug)
	})
}
