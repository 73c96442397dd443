package mcpgo_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/store/memory"
)

// callInfos is an idem.Tracer that keeps what it is told of each call.
type callInfos struct {
	mu    sync.Mutex
	calls []idem.CallInfo
}

func (c *callInfos) StartCall(ctx context.Context, info idem.CallInfo) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, info)
	return ctx
}

func (c *callInfos) EndCall(context.Context, idem.Event) {}

// The Tracer is told what a call came over: over streamable HTTP, the
// request's headers (a client's traceparent among them), "tcp" and the
// protocol version; in process, no headers and "pipe".
func TestTracerToldTheTransport(t *testing.T) {
	infos := &callInfos{}
	mem := memory.New(nil)
	t.Cleanup(func() { mem.Close() })
	srv := server.NewMCPServer("notes", "v1")
	mcpgo.AddTool(srv, mcp.NewTool("log_visit"), mcpgo.New(mem, &idem.Options{Tracer: infos}, nil),
		func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	overHTTP, err := client.NewStreamableHttpClient(hs.URL, transport.WithHTTPHeaders(map[string]string{"Traceparent": traceparent}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, overHTTP)
	call(t, overHTTP, "log_visit", map[string]any{"text": "a"}, nil)
	inProcess, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	start(t, inProcess)
	call(t, inProcess, "log_visit", map[string]any{"text": "b"}, nil)

	infos.mu.Lock()
	defer infos.mu.Unlock()
	if len(infos.calls) != 2 {
		t.Fatalf("%d calls told, want 2", len(infos.calls))
	}
	h, p := infos.calls[0], infos.calls[1]
	if h.Transport != "tcp" || h.Header.Get("Traceparent") != traceparent || h.ProtocolVersion == "" {
		t.Errorf("over HTTP: transport %q, traceparent %q, protocol version %q; want tcp, the client's, and a version",
			h.Transport, h.Header.Get("Traceparent"), h.ProtocolVersion)
	}
	if p.Transport != "pipe" || p.Header != nil || p.ProtocolVersion == "" {
		t.Errorf("in process: transport %q, header %v, protocol version %q; want pipe, none, and a version", p.Transport, p.Header, p.ProtocolVersion)
	}
}
