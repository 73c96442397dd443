package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A source is a server to audit: how to reach it.
type source struct {
	transport string // "stdio" or "http", for the report
	connect   func(ctx context.Context) (connection, error)
}

// A connection is a transport to the server and a way to explain its
// errors (the server's stderr, an HTTP status).
type connection struct {
	transport mcp.Transport
	explain   func(error) error
	close     func() // after the session is closed; may be nil
}

// A listing is what the server said: who it is and its tools, as sent.
type listing struct {
	Server mcp.Implementation
	Tools  []rawTool
}

// maxPages bounds tools/list pagination, against a server whose cursor
// never ends.
const maxPages = 1000

// list connects, initializes and lists every page of tools. It calls no
// tool.
func (s source) list(ctx context.Context) (*listing, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	if conn.close != nil {
		defer conn.close()
	}
	rec := &recorder{inner: conn.transport}
	client := mcp.NewClient(&mcp.Implementation{Name: "idem-audit", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, rec, nil)
	if err != nil {
		return nil, conn.explain(fmt.Errorf("initialize: %w", err))
	}
	defer cs.Close()
	l := &listing{}
	if info := cs.InitializeResult(); info != nil && info.ServerInfo != nil {
		l.Server = *info.ServerInfo
	}
	cursor := ""
	seen := map[string]bool{}
	for range maxPages {
		if _, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor}); err != nil {
			return nil, conn.explain(fmt.Errorf("tools/list: %w", err))
		}
		var page struct {
			Tools      []rawTool `json:"tools"`
			NextCursor string    `json:"nextCursor"`
		}
		raw := rec.last()
		if raw == nil {
			return nil, errors.New("tools/list: the answer was not seen on the wire")
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("tools/list: the answer cannot be read: %w", err)
		}
		l.Tools = append(l.Tools, page.Tools...)
		if page.NextCursor == "" {
			return l, nil
		}
		if seen[page.NextCursor] {
			return nil, errors.New("tools/list: the server sent a cursor it had sent before; the listing would not end")
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxPages)
}

// A recorder keeps the raw results of tools/list as they came over the
// wire: the go-sdk client reads them into types where an absent hint and
// a false one look alike, and drops tools it finds invalid.
type recorder struct {
	inner mcp.Transport

	mu      sync.Mutex      // guards pending and results
	pending map[string]bool // ids of tools/list requests sent
	results []json.RawMessage
}

func (r *recorder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{r: r, Connection: c}, nil
}

// last returns the latest tools/list result, or nil.
func (r *recorder) last() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.results) == 0 {
		return nil
	}
	return r.results[len(r.results)-1]
}

type recordingConn struct {
	r *recorder
	mcp.Connection
}

func idKey(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

func (c *recordingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		c.r.mu.Lock()
		if c.r.pending == nil {
			c.r.pending = map[string]bool{}
		}
		c.r.pending[idKey(req.ID)] = true
		c.r.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		k := idKey(resp.ID)
		c.r.mu.Lock()
		if c.r.pending[k] {
			delete(c.r.pending, k)
			if resp.Error == nil {
				c.r.results = append(c.r.results, append(json.RawMessage(nil), resp.Result...))
			}
		}
		c.r.mu.Unlock()
	}
	return msg, err
}

// commandTransport runs cmd; closing the session closes its stdin and
// waits a little for it to exit.
func commandTransport(cmd *exec.Cmd) mcp.Transport {
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// httpTransport talks streamable HTTP to endpoint without the standalone
// event stream (the audit waits for no notification) and without
// reconnecting: an audit that cannot reach the server says so.
func httpTransport(endpoint string, client *http.Client) mcp.Transport {
	return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client, DisableStandaloneSSE: true, MaxRetries: -1}
}

// bearer adds the bearer token to each request and remembers a 401 or 403
// answer, which the go-sdk's error does not always name.
type bearer struct {
	token string
	base  http.RoundTripper

	mu     sync.Mutex // guards status
	status int
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.base.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		b.mu.Lock()
		b.status = resp.StatusCode
		b.mu.Unlock()
	}
	return resp, err
}

// refused returns the status of a refused request (401 or 403), or 0.
func (b *bearer) refused() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int

	mu  sync.Mutex // guards buf
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
