// Package idemtest helps server authors test that their tools are safe to
// call twice: a transport that loses the response to a tool call after the
// handler committed, as a dropped connection does, and new connections to
// reconnect with, for a go-sdk *mcp.Server in process or for any
// streamable HTTP handler.
//
//	d := &idemtest.Dropper{Tool: "publish"}
//	cs, _ := idemtest.Connect(ctx, srv, d.Wrap)
//	_, err := cs.CallTool(ctx, params) // the server commits; the response is lost
//	cs, _ = idemtest.Connect(ctx, srv, nil) // reconnect, as a client would
//	res, _ := cs.CallTool(ctx, params)      // must not write twice
//
// Over HTTP, whichever library serves it (the go-sdk, mark3labs/mcp-go, a
// server built per request), an [HTTPDropper] in front of the handler loses
// the answers it is armed for the same way, and an [HTTPServer] serves the
// handler on loopback behind one and connects go-sdk clients to it:
//
//	hs := idemtest.NewHTTPServer(handler)
//	defer hs.Close()
//	res, _ := hs.DropAndRetry(ctx, params) // must not write twice
//
// DropAndRetry does those steps in one call, SendTwice sends a call twice on
// one connection (from Connect or HTTPServer.Connect), and SameAnswer
// compares two answers as a caller reads them. AllOrders sends a set of
// calls in every order, and Concurrently sends calls at once, each run on
// fresh state from the test's Subject, and they compare the end states.
// ModelRetries plays a model that lost an answer and calls again with the
// values it minted made anew (a fresh op id, a new UUID, a clock read
// again), and reports the retries that moved the state. A Subject is a
// server in process or an HTTP handler.
package idemtest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrDropped is returned by the server-side Write of a response the Dropper
// dropped.
var ErrDropped = errors.New("idemtest: response dropped")

// A Dropper drops the responses to tools/call requests on the server
// connections it wraps: the handler runs and returns, then the connection
// closes instead of sending its answer, so the client sees a broken
// connection and cannot know whether the call committed. Its state is shared
// by every connection it wraps, so a client that reconnects through another
// wrapped transport is not dropped again once the budget is spent.
//
// The zero value drops the response to the first tools/call of any tool.
type Dropper struct {
	// Tool limits dropping to calls of this tool; "" means any tool.
	Tool string
	// Count is how many responses to drop in all; 0 (or less) means 1. To
	// drop nothing, connect without the Dropper.
	Count int

	mu      sync.Mutex // guards dropped and calls
	dropped int
	calls   map[*dropConn]map[string]bool // request ids (as JSON) marked for dropping, per connection
}

// Wrap returns a transport whose connections drop responses as d says. It
// has the signature [Connect] takes.
func (d *Dropper) Wrap(t mcp.Transport) mcp.Transport { return &dropTransport{d: d, inner: t} }

// Dropped reports how many responses d has dropped.
func (d *Dropper) Dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

type dropTransport struct {
	d     *Dropper
	inner mcp.Transport
}

func (t *dropTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &dropConn{d: t.d, Connection: c}, nil
}

type dropConn struct {
	d *Dropper
	mcp.Connection
}

func idKey(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

func (c *dropConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" || !req.ID.IsValid() {
		return msg, nil
	}
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(req.Params, &p)
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	budget := max(d.Count, 1)
	marked := 0
	for _, ids := range d.calls {
		marked += len(ids)
	}
	if (d.Tool == "" || d.Tool == p.Name) && d.dropped+marked < budget {
		if d.calls == nil {
			d.calls = make(map[*dropConn]map[string]bool)
		}
		if d.calls[c] == nil {
			d.calls[c] = make(map[string]bool)
		}
		d.calls[c][idKey(req.ID)] = true
	}
	return msg, nil
}

func (c *dropConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		d := c.d
		d.mu.Lock()
		k := idKey(resp.ID)
		drop := d.calls[c][k]
		if drop {
			delete(d.calls[c], k)
			d.dropped++
		}
		d.mu.Unlock()
		if drop {
			c.Connection.Close()
			return ErrDropped
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Connect connects a new client to srv over a fresh pair of in-memory
// transports, as a client that reconnects would. wrap, if not nil, wraps the
// server's side (for example [Dropper.Wrap]). The client and server sessions
// close when the client session does.
func Connect(ctx context.Context, srv *mcp.Server, wrap func(mcp.Transport) mcp.Transport) (*mcp.ClientSession, error) {
	st, ct := mcp.NewInMemoryTransports()
	var serverSide mcp.Transport = st
	if wrap != nil {
		serverSide = wrap(st)
	}
	ss, err := srv.Connect(ctx, serverSide, nil)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "idemtest", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, err
	}
	return cs, nil
}

// Close closes the connection and forgets the calls it had marked for
// dropping, so they do not use up the Dropper's budget.
func (c *dropConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.calls, c)
	c.d.mu.Unlock()
	return c.Connection.Close()
}
