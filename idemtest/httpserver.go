package idemtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An HTTPServer serves an MCP server's streamable HTTP handler on
// loopback behind an [HTTPDropper], whichever library made the handler
// (the go-sdk's mcp.NewStreamableHTTPHandler, stateless or not, over a
// server built once or per request; mcp-go's server.NewStreamableHTTPServer),
// and connects go-sdk clients to it. It is to a handler what [Connect] and
// a [Dropper] are to an *mcp.Server in process:
//
//	hs := idemtest.NewHTTPServer(handler)
//	defer hs.Close()
//	res, err := hs.DropAndRetry(ctx, params) // must not write twice
//	cs, err := hs.Connect(ctx)                // for SendTwice, or calls of your own
//
// A [Subject] whose Handler is set is served by one, so that AllOrders,
// Concurrently and ModelRetries test the handler too.
type HTTPServer struct {
	// URL is the endpoint clients connect to: the server's root. For a
	// handler that serves MCP under a path of its own (a mux), add the
	// path before connecting.
	URL string
	// Dropper stands in front of the handler: arm it to lose the answer
	// to the next call of a tool.
	Dropper *HTTPDropper

	hs *httptest.Server
}

// NewHTTPServer starts serving h on a loopback port, behind an
// HTTPDropper armed for nothing. Close it when done.
func NewHTTPServer(h http.Handler) *HTTPServer {
	d := &HTTPDropper{Next: h}
	hs := httptest.NewServer(d)
	return &HTTPServer{URL: hs.URL, Dropper: d, hs: hs}
}

// Close closes every connection to s, open sessions' included, and stops
// serving.
func (s *HTTPServer) Close() {
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// Connect connects a new go-sdk client to s over streamable HTTP, as a
// client that reconnects would: the client opens with the protocol it
// prefers and falls back as it does against any server, then lists the
// tools, as clients do before they call one (a server that asks for
// arguments in request headers, Mcp-Param-*, gets them only from a client
// that listed its tools). Close the session when done.
func (s *HTTPServer) Connect(ctx context.Context) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "idemtest", Version: "v0"}, nil)
	// MaxRetries -1: a lost answer is an error at once, not a reconnect
	// that waits for a stream the reset ended.
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: s.hs.Client(), MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		cs.Close()
		return nil, fmt.Errorf("idemtest: listing the tools: %w", err)
	}
	return cs, nil
}

// DropAndRetry is [DropAndRetry] over HTTP: it sends params to s with the
// Dropper armed for params.Name, so that the connection is reset once the
// handler ran, then connects a new client and sends params again. It
// returns the retry's answer. An error means the first answer was not
// lost or the retry failed. Send no other call of the tool at the same
// time: the Dropper loses the first that reaches it.
func (s *HTTPServer) DropAndRetry(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return dropAndRetry(ctx, s, params)
}

func (s *HTTPServer) connect(ctx context.Context) (*mcp.ClientSession, error) { return s.Connect(ctx) }

// loseAnswer sends params over a new connection whose answer the Dropper
// loses after the handler ran; an error means the answer was not lost.
func (s *HTTPServer) loseAnswer(ctx context.Context, params *mcp.CallToolParams) error {
	before := s.Dropper.Dropped()
	s.Dropper.Arm(params.Name)
	cs, err := s.Connect(ctx)
	if err != nil {
		s.Dropper.disarm(params.Name)
		return err
	}
	_, callErr := cs.CallTool(ctx, params)
	cs.Close()
	if s.Dropper.Dropped() != before+1 {
		s.Dropper.disarm(params.Name)
		return fmt.Errorf("idemtest: the first answer was not lost (call error: %v)", callErr)
	}
	return nil
}
