package storetest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/mwlib"
)

// goSDK is the official go-sdk as the middleware cases' library: tools
// registered with idem.AddTool, clients connected in memory.
type goSDK struct{}

func (goSDK) Name() string { return "go-sdk" }

func (goSDK) NewServer(t *testing.T, c mwlib.Config) mwlib.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "storetest", Version: "v0"}, nil)
	opts := c.Options
	if c.Scope != nil {
		opts.Scope = func(ctx context.Context, req *mcp.CallToolRequest) string { return c.Scope(ctx, goSDKRequest{req}) }
	}
	guard := idem.New(c.Store, &opts)
	for _, tl := range c.Tools {
		switch h := tl.Handler.(type) {
		case mwlib.Handler[noteIn, noteOut]:
			goSDKTool(srv, guard, tl, h)
		case mwlib.Handler[statusIn, statusIn]:
			goSDKTool(srv, guard, tl, h)
		case mwlib.Handler[closeIn, closeIn]:
			goSDKTool(srv, guard, tl, h)
		case mwlib.Handler[mwlib.BumpIn, counter]:
			goSDKTool(srv, guard, tl, h)
		default:
			t.Fatalf("tool %s: a handler of no pair the libraries register: %T", tl.Name, tl.Handler)
		}
	}
	if c.Status {
		idem.RegisterStatusTool(srv, guard)
	}
	if c.Arrived != nil {
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					c.Arrived()
				}
				return next(ctx, method, req)
			}
		})
	}
	return goSDKServer{srv}
}

// goSDKTool registers h as tool tl with idem.AddTool.
func goSDKTool[In, Out any](srv *mcp.Server, s idem.Store, tl mwlib.Tool, h mwlib.Handler[In, Out]) {
	tool := &mcp.Tool{Name: tl.Name, Description: tl.Description}
	if tl.InputSchema != nil {
		tool.InputSchema = tl.InputSchema
	}
	idem.AddTool(srv, tool, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		e, out, err := h(ctx, tx, goSDKRequest{req}, in)
		if e == nil {
			return nil, out, err
		}
		res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: e.Text}}}
		if e.Code != "" {
			res.Meta = mcp.Meta{idem.MetaError: string(e.Code)}
		}
		return res, out, err
	}, tl.Options...)
}

type goSDKRequest struct{ req *mcp.CallToolRequest }

func (r goSDKRequest) Meta() map[string]any { return r.req.Params.Meta }

func (r goSDKRequest) Resolve(q target.Query) (string, error) {
	q.Request = r.req
	return target.Resolve(q)
}

type goSDKServer struct{ srv *mcp.Server }

func (s goSDKServer) Connect(t *testing.T, lose string) *mcp.ClientSession {
	t.Helper()
	var wrap func(mcp.Transport) mcp.Transport
	if lose != "" {
		wrap = (&idemtest.Dropper{Tool: lose}).Wrap
	}
	return connectTo(t, s.srv, wrap)
}

func (s goSDKServer) HTTP(users map[string]string) http.Handler {
	verify := func(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
		u, ok := users[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: u, Expiration: time.Now().Add(time.Hour)}, nil
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)
	return auth.RequireBearerToken(verify, nil)(handler)
}
