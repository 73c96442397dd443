package interop_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A wire sits between a client and a server's streamable HTTP endpoint on
// loopback. It records every JSON-RPC request that passes, and loses the
// answer to chosen tool calls after the server has answered them (so after
// the commit), the way the agent CLIs were observed to lose them.
type wire struct {
	url      string // the endpoint clients connect to
	upstream *url.URL

	mu    sync.Mutex
	seen  []wireRequest
	loses map[string][]loss // tool -> losses still to inflict, in order
}

// A loss is how the answer to one tool call is lost.
type loss string

const (
	// lossReset: the connection is reset (TCP RST) before any byte of
	// the answer; the client sees ECONNRESET or the like.
	lossReset loss = "reset"
	// lossCut: the answer's headers (200, text/event-stream) go out, then
	// the connection closes before the event that holds the result.
	lossCut loss = "cut"
)

// A wireRequest is one JSON-RPC request or notification a client sent.
type wireRequest struct {
	HTTPMethod    string // POST, GET or DELETE
	Method        string // the JSON-RPC method; "" for a GET or DELETE
	Tool          string // tools/call: params.name
	HeaderVersion string // the Mcp-Protocol-Version header
	MetaVersion   string // params._meta["io.modelcontextprotocol/protocolVersion"]
	SessionID     string // the Mcp-Session-Id header
	Lost          loss   // the answer was lost this way
}

// newWire starts a wire in front of endpoint (an http:// URL) and returns
// it; it stops when t ends.
func newWire(t *testing.T, endpoint string) *wire {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{upstream: u, loses: map[string][]loss{}}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
		r.Out.URL.Path = u.Path
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if l := w.record(r, body); l != "" {
			w.lose(rw, r, body, l)
			return
		}
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL + u.Path
	return w
}

// loseNext makes the wire lose the answers to the next len(ls) calls of
// tool, one loss each.
func (w *wire) loseNext(tool string, ls ...loss) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loses[tool] = append(w.loses[tool], ls...)
}

// record notes the requests in body and returns how to lose the answer,
// or "" to pass it on.
func (w *wire) record(r *http.Request, body []byte) loss {
	w.mu.Lock()
	defer w.mu.Unlock()
	base := wireRequest{HTTPMethod: r.Method, HeaderVersion: r.Header.Get("Mcp-Protocol-Version"), SessionID: r.Header.Get("Mcp-Session-Id")}
	if r.Method != http.MethodPost {
		w.seen = append(w.seen, base)
		return ""
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(body, &msgs); err != nil {
		msgs = []json.RawMessage{body}
	}
	var l loss
	for _, m := range msgs {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string         `json:"name"`
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(m, &msg) != nil || msg.Method == "" {
			continue // a response to a server request
		}
		req := base
		req.Method = msg.Method
		req.MetaVersion, _ = msg.Params.Meta["io.modelcontextprotocol/protocolVersion"].(string)
		if msg.Method == "tools/call" {
			req.Tool = msg.Params.Name
			if q := w.loses[req.Tool]; len(q) > 0 && len(msgs) == 1 {
				l, w.loses[req.Tool] = q[0], q[1:]
				req.Lost = l
			}
		}
		w.seen = append(w.seen, req)
	}
	return l
}

// lose sends the request on, reads the whole answer (the server has done
// the call), and loses it as l says.
func (w *wire) lose(rw http.ResponseWriter, r *http.Request, body []byte, l loss) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, w.upstream.String(), bytes.NewReader(body))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	out.Header = r.Header.Clone()
	res, err := http.DefaultTransport.RoundTrip(out)
	if err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	if l == lossCut {
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(http.StatusOK)
		rw.(http.Flusher).Flush()
	}
	conn, _, err := http.NewResponseController(rw).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && l == lossReset {
		tc.SetLinger(0) // close sends RST
	}
	conn.Close()
}

// requests returns what the wire has seen so far.
func (w *wire) requests() []wireRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// sent lists what the wire has seen, one "HTTP-method JSON-RPC-method"
// string per request ("tools/call" with its tool's name and, when its
// answer was lost, how).
func (w *wire) sent() []string {
	var out []string
	for _, r := range w.requests() {
		s := r.HTTPMethod + " " + r.Method
		if r.Tool != "" {
			s += " " + r.Tool
		}
		if r.Lost != "" {
			s += " (" + string(r.Lost) + ")"
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// calls returns how many tools/call requests for tool reached the server.
func (w *wire) calls(tool string) int {
	n := 0
	for _, r := range w.requests() {
		if r.Method == "tools/call" && r.Tool == tool {
			n++
		}
	}
	return n
}
