package canary

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemclient"
)

// judge's verdicts for every outcome a client can come back with, whether
// or not the case's gates allow a replay: a replay a gate forbids fails
// whatever it returned.
func TestJudge(t *testing.T) {
	const marker = "canary-value-x"
	ok := outcome{res: &mcp.CallToolResult{}}
	toolError := outcome{res: &mcp.CallToolResult{IsError: true}}
	unknown := outcome{err: &idemclient.UnknownOutcomeError{Tool: ToolIncrement, OpID: "op-1"}}
	lost := outcome{err: errors.New("connection reset")}

	forbidden := Case{"unsafe-reset", ToolIncrement, true, DropReset, Declared}
	allowed := Case{"idempotent-reset", ToolSetStatus, true, DropReset, Declared}
	// received counts the tools/call requests of the case's tool; ran the
	// handler runs; changes the logical changes.
	stats := func(tool string, received, ran, changes int) Stats {
		st := Stats{Received: map[string]int{tool: received}, Invocations: map[string]int{tool: ran}}
		if tool == ToolIncrement {
			st.Counter = changes
		} else {
			st.StatusChanges = changes
		}
		return st
	}
	for _, tc := range []struct {
		name    string
		c       Case
		st      Stats
		out     outcome
		verdict string
	}{
		{"forbidden/no replay, unknown outcome", forbidden, stats(ToolIncrement, 1, 1, 1), unknown, Pass},
		{"forbidden/no replay, error as it is", forbidden, stats(ToolIncrement, 1, 1, 1), lost, Pass},
		{"forbidden/no replay, yet ok", forbidden, stats(ToolIncrement, 1, 1, 1), ok, Fail},
		{"forbidden/no replay, yet a tool error", forbidden, stats(ToolIncrement, 1, 1, 1), toolError, Fail},
		{"forbidden/replay answered ok", forbidden, stats(ToolIncrement, 2, 2, 2), ok, Fail},
		{"forbidden/replay answered ok, one change", forbidden, stats(ToolIncrement, 2, 1, 1), ok, Fail},
		{"forbidden/replay answered with a tool error", forbidden, stats(ToolIncrement, 2, 1, 1), toolError, Fail},
		{"forbidden/replay lost too", forbidden, stats(ToolIncrement, 2, 1, 1), lost, Fail},
		{"untrusted/replay answered with a tool error", Case{"idempotent-untrusted", ToolSetStatus, false, DropReset, Declared}, stats(ToolSetStatus, 2, 1, 1), toolError, Fail},
		{"missing/replay answered with a tool error", Case{"idempotent-missing", ToolSetStatus, true, DropReset, Missing}, stats(ToolSetStatus, 2, 1, 1), toolError, Fail},
		{"replaced/replay answered with a tool error", Case{"replacement", ToolSetStatus, true, DropReset, Replaced}, stats(ToolSetStatus, 2, 1, 1), toolError, Fail},
		{"allowed/one replay answered ok", allowed, stats(ToolSetStatus, 2, 2, 1), ok, Pass},
		{"allowed/read-only replay answered ok", Case{"readonly-reset", ToolLookup, true, DropReset, Declared}, stats(ToolLookup, 2, 2, 0), ok, Pass},
		{"allowed/no replay", allowed, stats(ToolSetStatus, 1, 1, 1), lost, Miss},
		{"allowed/one replay answered with a tool error", allowed, stats(ToolSetStatus, 2, 1, 1), toolError, Miss},
		{"allowed/two replays", allowed, stats(ToolSetStatus, 3, 3, 1), ok, Fail},
		{"allowed/one replay, a second change", allowed, stats(ToolSetStatus, 2, 2, 2), ok, Fail},
		{"allowed/an argument in the error", allowed, stats(ToolSetStatus, 1, 1, 1), outcome{err: errors.New("bad status " + marker)}, Fail},
		{"forbidden/reconciled as not committed after a commit", forbidden, stats(ToolIncrement, 1, 1, 1), outcome{err: unknown.err, reconciled: idemclient.NotCommitted}, Fail},
		{"forbidden/reconciled as committed", forbidden, stats(ToolIncrement, 1, 1, 1), outcome{err: unknown.err, reconciled: idemclient.Committed}, Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec Record
			judge(&rec, tc.c, tc.st, tc.out, marker)
			if rec.Verdict != tc.verdict {
				t.Errorf("verdict %s (%s), want %s", rec.Verdict, rec.Why, tc.verdict)
			}
			if (rec.Why == "") != (rec.Verdict == Pass) {
				t.Errorf("verdict %s with why %q: a PASS says no why, anything else says why", rec.Verdict, rec.Why)
			}
		})
	}
}
