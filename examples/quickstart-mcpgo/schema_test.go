package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// serveTest serves the quickstart on a fresh store over HTTP on loopback,
// in this process, and returns a client of it and the store.
func serveTest(t *testing.T) (*client.Client, idem.Store) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(exserve.DefaultLimits().Endpoint(serving(NewServer(s), slog.New(slog.NewTextHandler(io.Discard, nil))).HTTP, nil))
	t.Cleanup(hs.Close)
	return dial(t, hs.URL+exserve.Path, ""), s
}

// TestSchemaStatesLimits reads tools/list as a client does: the limits the
// arguments' descriptions state (an amount above zero, a month as
// YYYY-MM) are in the input schema too, as in the go-sdk quickstart; and
// add_expense says it is for apps.
func TestSchemaStatesLimits(t *testing.T) {
	cl, _ := serveTest(t)
	res, err := cl.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	extest.QuickstartSchema(t, extest.ListedTools(t, res.Tools))
}

// TestOutOfRangeRefusedBeforeHandler sends values the schema refuses: each
// is refused with invalid_arguments (the handler's own refusal would be
// not_saved), quotes no value, and writes nothing.
func TestOutOfRangeRefusedBeforeHandler(t *testing.T) {
	cl, s := serveTest(t)
	extest.QuickstartOutOfRange(t, s, ledgerKey, func(tool string, args map[string]any) extest.Answer {
		res, err := cl.CallTool(t.Context(), callOf(tool, args))
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		return answerOf(res)
	})
}
