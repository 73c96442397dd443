// Package mcpgotest runs the conformance suite's middleware cases
// (store/storetest) through idem's adapter for mark3labs/mcp-go, on any
// store: the cases [storetest.Run] runs through the go-sdk, with each tool
// registered by mcpgo.AddTool on an mcp-go server, and a go-sdk client over
// streamable HTTP.
//
//	func TestMiddlewareThroughMCPGo(t *testing.T) {
//		mcpgotest.RunMiddleware(t, storetest.Harness{
//			New: func(t *testing.T, now func() time.Time) idem.Store {
//				return memory.New(&memory.Options{Now: now})
//			},
//			Reader: true,
//		})
//	}
package mcpgotest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/mwlib"
	"github.com/idemkit/sdk/store/storetest"
)

// RunMiddleware runs the middleware cases through mcp-go servers on the
// stores h makes. Of h, it reads New, Reader and Concurrency.
func RunMiddleware(t *testing.T, h storetest.Harness) {
	t.Helper()
	storetest.RunMiddleware(t, h, library{})
}

// library is mcp-go as the middleware cases' library. mcp-go has no
// authenticated user of its own: as its authors are told to
// (docs/protect.md), the servers put the user a bearer token stands for in
// the context and the Guard reads it back with mcpgo.Options.Scope.
type library struct{}

func (library) Name() string { return "mcp-go" }

func (library) NewServer(t *testing.T, c mwlib.Config) mwlib.Server {
	t.Helper()
	var opts []server.ServerOption
	if c.Arrived != nil {
		opts = append(opts, server.WithToolHandlerMiddleware(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
			return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				c.Arrived()
				return next(ctx, req)
			}
		}))
	}
	srv := server.NewMCPServer("storetest", "v0", opts...)
	scope := userScope
	if c.Scope != nil {
		scope = func(ctx context.Context, req mcp.CallToolRequest) string { return c.Scope(ctx, request{req}) }
	}
	guard := mcpgo.New(c.Store, &c.Options, &mcpgo.Options{Scope: scope})
	for _, tl := range c.Tools {
		switch h := tl.Handler.(type) {
		case mwlib.Handler[mwlib.NoteIn, mwlib.NoteOut]:
			addTool(srv, guard, tl, h)
		case mwlib.Handler[mwlib.StatusIn, mwlib.StatusIn]:
			addTool(srv, guard, tl, h)
		case mwlib.Handler[mwlib.CloseIn, mwlib.CloseIn]:
			addTool(srv, guard, tl, h)
		case mwlib.Handler[mwlib.BumpIn, mwlib.Counter]:
			addTool(srv, guard, tl, h)
		default:
			t.Fatalf("tool %s: a handler of no pair the libraries register: %T", tl.Name, tl.Handler)
		}
	}
	if c.Status {
		mcpgo.RegisterStatusTool(srv, guard)
	}
	return mcpgoServer{srv}
}

// userKey is the context key of the user a bearer token stands for.
type userKey struct{}

// userScope is the scope of a server without one of its own: the
// caller's user, "" for none.
func userScope(ctx context.Context, req mcp.CallToolRequest) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// addTool registers h as tool tl with mcpgo.AddTool.
func addTool[In, Out any](srv *server.MCPServer, s idem.Store, tl mwlib.Tool, h mwlib.Handler[In, Out]) {
	tool := mcp.NewTool(tl.Name, mcp.WithDescription(tl.Description))
	if tl.InputSchema != nil {
		tool.RawInputSchema = tl.InputSchema
	}
	mcpgo.AddTool(srv, tool, s, func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		e, out, err := h(ctx, tx, request{req}, in)
		if e == nil {
			return nil, out, err
		}
		res := mcp.NewToolResultError(e.Text)
		if e.Code != "" {
			res.Meta = &mcp.Meta{AdditionalFields: map[string]any{idem.MetaError: string(e.Code)}}
		}
		return res, out, err
	}, tl.Options...)
}

type request struct{ req mcp.CallToolRequest }

func (r request) Meta() map[string]any {
	if r.req.Params.Meta == nil {
		return nil
	}
	return r.req.Params.Meta.AdditionalFields
}

func (r request) Resolve(q target.Query) (string, error) {
	q.Queued = q.Queued || mcpgo.Queued(r.req)
	return target.Resolve(q)
}

type mcpgoServer struct{ srv *server.MCPServer }

// Connect connects over streamable HTTP: mcp-go's stdio server keeps one
// session for the whole process, and the cases run many servers at once.
func (s mcpgoServer) Connect(t *testing.T, lose string) *gosdk.ClientSession {
	t.Helper()
	var h http.Handler = s.streamable(t)
	if lose != "" {
		d := &idemtest.HTTPDropper{Next: h}
		d.Arm(lose)
		h = d
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	client := gosdk.NewClient(&gosdk.Implementation{Name: "storetest", Version: "v0"}, nil)
	cs, err := client.Connect(context.Background(), &gosdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (s mcpgoServer) HTTP(users map[string]string) http.Handler {
	h := server.NewStreamableHTTPServer(s.srv, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, userKey{}, users[token(r)])
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := users[token(r)]; !ok {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// streamable is s over streamable HTTP, shut down when t ends.
func (s mcpgoServer) streamable(t *testing.T) *server.StreamableHTTPServer {
	h := server.NewStreamableHTTPServer(s.srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return h
}

func token(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}
