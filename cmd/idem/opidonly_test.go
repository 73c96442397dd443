package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// asOpIDOnlyServer, set in the environment, makes the test binary serve
// the op-id-only test server on stdin/stdout instead of running tests.
const asOpIDOnlyServer = "IDEM_AUDIT_TEST_SERVE_OP_ID_ONLY"

// Note is the input of the op-id-only server's append_note.
type Note struct {
	Text string `json:"text" jsonschema:"the note"`
}

// newOpIDOnlyServer returns a server with one write, append_note, as
// idem.AddTool registers a RequireOpID tool without record keys and
// without ForApps: safe for an app that keeps its op id, not for a model's
// retry, and not declared for apps, so the audit warns on it (op_id_only)
// and finds nothing else.
func newOpIDOnlyServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "op-id-only-test-server", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "append_note", Description: "Append a note to the log.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}},
		memory.New(nil), func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Note, error) {
			return nil, Note{}, errors.New("the audit calls no tool")
		}, idem.RequireOpID())
	return srv
}

// TestOpIDOnlyWarning audits the op-id-only server started as a command
// (this test binary): its one tool an idempotent write with the
// op_id_only warning and no other finding, exit status 0, and 1 with
// -strict.
func TestOpIDOnlyWarning(t *testing.T) {
	t.Setenv(asOpIDOnlyServer, "1")
	status, r := auditJSON(t, "--", os.Args[0])
	if status != exitPass {
		t.Errorf("exit status %d, want %d", status, exitPass)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "append_note" || r.Tools[0].Class != classIdempotent {
		t.Fatalf("tools %+v, want append_note, an idempotent write", r.Tools)
	}
	var codes []string
	for _, f := range r.Tools[0].Findings {
		codes = append(codes, f.Severity+" "+f.Code)
	}
	if strings.Join(codes, ", ") != "warning op_id_only" || r.Warnings != 1 || r.Problems != 0 {
		t.Errorf("findings %v (%d warnings, %d problems), want the op_id_only warning alone", codes, r.Warnings, r.Problems)
	}
	if status, _, _ := audit(t, "-strict", "--", os.Args[0]); status != exitFindings {
		t.Errorf("-strict: exit status %d, want %d", status, exitFindings)
	}
}
