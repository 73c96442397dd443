package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/store/sqlite"
)

// TestHTTPRepeatAndRestart sends add_expense twice with one op id over
// streamable HTTP, restarts the server on the same database file, and sends
// it a third time: one expense, one total, the same answer each time.
func TestHTTPRepeatAndRestart(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "q.db")
	extest.QuickstartRepeatAndRestart(t, func(args map[string]any) extest.Answer {
		t.Helper()
		s, err := sqlite.Open(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		srv := NewServer(s)
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		defer hs.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_expense", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("add_expense: %v", res.Content)
		}
		return answerOf(res)
	})
}

// answerOf is res as the checks the quickstarts share read it.
func answerOf(res *mcp.CallToolResult) extest.Answer {
	b, _ := json.Marshal(res.Content)
	return extest.Answer{IsError: res.IsError, Content: string(b), Structured: res.StructuredContent, Meta: res.Meta}
}

// TestToolAnnotations lists the tools as a client would and checks that
// their annotations say what the wrapping guarantees, and that every tool
// says it touches the server's store alone (openWorldHint false) and
// whether it destroys what was there.
func TestToolAnnotations(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := NewServer(s).Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]bool{ // idempotent, read-only, destructive
		"add_expense":   {true, false, false},
		"set_budget":    {true, false, true},
		"get_operation": {true, true, false},
	}
	for _, tool := range tools.Tools {
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if tool.Annotations == nil || tool.Annotations.IdempotentHint != w[0] || tool.Annotations.ReadOnlyHint != w[1] {
			t.Errorf("%s annotations %+v, want idempotent=%v readOnly=%v", tool.Name, tool.Annotations, w[0], w[1])
			continue
		}
		if d := tool.Annotations.DestructiveHint; d == nil || *d != w[2] {
			t.Errorf("%s: destructiveHint %v, want %v", tool.Name, d, w[2])
		}
		if ow := tool.Annotations.OpenWorldHint; ow == nil || *ow {
			t.Errorf("%s: openWorldHint %v, want false", tool.Name, ow)
		}
		delete(want, tool.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing tools %v", want)
	}
}
