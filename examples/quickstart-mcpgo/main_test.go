package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/store/sqlite"
)

// TestHTTPRepeatAndRestart sends add_expense twice with one op id over
// streamable HTTP, restarts the server on the same database file, and sends
// it a third time: one expense, one total, the same answer each time.
func TestHTTPRepeatAndRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	extest.QuickstartRepeatAndRestart(t, func(args map[string]any) extest.Answer {
		t.Helper()
		s, err := sqlite.Open(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h := serving(NewServer(s), slog.New(slog.NewTextHandler(io.Discard, nil))).HTTP
		hs := httptest.NewServer(exserve.DefaultLimits().Endpoint(h, nil))
		defer hs.Close()
		res, err := dial(t, hs.URL+exserve.Path, "").CallTool(t.Context(), callOf("add_expense", args))
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("add_expense: %s", exserve.JSONOf(res, ""))
		}
		return answerOf(res)
	})
}

// answerOf is res as the checks the quickstarts share read it.
func answerOf(res *mcp.CallToolResult) extest.Answer {
	var meta map[string]any
	if res.Meta != nil {
		meta = res.Meta.AdditionalFields
	}
	return extest.Answer{IsError: res.IsError, Content: exserve.JSONOf(res.Content, ""), Structured: res.StructuredContent, Meta: meta}
}

// TestToolAnnotations lists the tools as a client would and checks that
// their annotations say what the wrapping guarantees.
func TestToolAnnotations(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := httptest.NewServer(exserve.DefaultLimits().Endpoint(serving(NewServer(s), slog.New(slog.NewTextHandler(io.Discard, nil))).HTTP, nil))
	defer hs.Close()
	tools, err := dial(t, hs.URL+exserve.Path, "").ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]bool{ // idempotent, read-only
		"add_expense":   {true, false},
		"set_budget":    {true, false},
		"get_operation": {true, true},
	}
	for _, tool := range tools.Tools {
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		a := tool.Annotations
		if a.IdempotentHint == nil || *a.IdempotentHint != w[0] || (a.ReadOnlyHint != nil && *a.ReadOnlyHint) != w[1] {
			t.Errorf("%s annotations %s, want idempotent=%v readOnly=%v", tool.Name, exserve.JSONOf(a, ""), w[0], w[1])
		}
		delete(want, tool.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing tools %v", want)
	}
}
