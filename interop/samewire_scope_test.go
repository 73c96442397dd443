package interop_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	idemmcpgo "github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/store/memory"
)

// A scopeNote is the argument of the scope comparison's tool.
type scopeNote struct {
	Text string `json:"text"`
}

// TestWireScopeRequiredSameAsGoSDK compares the one refusal the quickstarts
// cannot give, scope_required: a caller that sent credentials but has no
// user id. On the go-sdk that is a bearer token whose verifier sets no
// user; on mcp-go, which has no user of its own, any Authorization header
// on a server without mcpgo.Scope. The same tool on each library, served
// stateless over HTTP, gets the same requests; the answers must be equal
// (the servers are in this process, so tools/list's cache hints, a
// difference TestWireSameAsGoSDK lists, are not compared here).
func TestWireScopeRequiredSameAsGoSDK(t *testing.T) {
	handler := func(ctx context.Context, tx idem.Tx, in scopeNote) error {
		return tx.Create(ctx, idem.Key{Collection: "notes", ID: in.Text}, in)
	}

	gs := mcp.NewServer(&mcp.Implementation{Name: "scope", Version: "v0"}, nil)
	store := memory.New(nil)
	idem.AddTool(gs, &mcp.Tool{Name: "add_note"}, store,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in scopeNote) (*mcp.CallToolResult, any, error) {
			return nil, nil, handler(ctx, tx, in)
		}, idem.RequireOpID())
	idem.RegisterStatusTool(gs, store)
	noUser := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil // a token, but no user id
	}
	goSDK := httptest.NewServer(auth.RequireBearerToken(noUser, nil)(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gs }, &mcp.StreamableHTTPOptions{Stateless: true})))
	defer goSDK.Close()

	ms := mcpgoserver.NewMCPServer("scope", "v0")
	mstore := memory.New(nil)
	idemmcpgo.AddTool(ms, mcpgo.NewTool("add_note"), mstore,
		func(ctx context.Context, tx idem.Tx, _ mcpgo.CallToolRequest, in scopeNote) (*mcpgo.CallToolResult, any, error) {
			return nil, nil, handler(ctx, tx, in)
		}, idem.RequireOpID())
	idemmcpgo.RegisterStatusTool(ms, mstore)
	mcpGo := httptest.NewServer(mcpgoserver.NewStreamableHTTPServer(ms, mcpgoserver.WithStateLess(true)))
	defer mcpGo.Close()

	xs := []wireExchange{
		toolCall("scope_required", "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil),
		toolCall("scope_required_meta", "add_note", map[string]any{"text": "hi"}, map[string]any{"io.idemkit/op_id": "op-1"}),
		toolCall("status_scope_required", "get_operation", map[string]any{"tool": "add_note", "op_id": "op-1"}, nil),
	}
	ctx := testContext(t)
	answers := func(url string) map[string]any {
		out := map[string]any{}
		for i, x := range xs {
			req := rawRequest(t, ctx, url, i+1, x.method, x.params)
			req.Header.Set("Authorization", "Bearer tok")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", x.id, err)
			}
			a := normalAnswer(t, x.id, nextMessage(t, bufio.NewReader(res.Body), res.Header.Get("Content-Type")))
			res.Body.Close()
			a["http_status"] = float64(res.StatusCode)
			out[x.id] = a
		}
		return out
	}
	a, b := answers(goSDK.URL), answers(mcpGo.URL)
	for _, x := range xs {
		for _, d := range diffJSON(nil, x.id, a[x.id], b[x.id]) {
			t.Errorf("%v", d)
		}
		meta := mapAt(mapAt(b[x.id].(map[string]any), "result"), "_meta")
		if meta["io.idemkit/error"] != string(idem.CodeScopeRequired) {
			t.Errorf("%s: the mcp-go server answered %v, want scope_required", x.id, b[x.id])
		}
	}
}
