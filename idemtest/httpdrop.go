package idemtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// An HTTPDropper loses the answers to tools/call requests sent to an MCP
// server's HTTP handler, whichever library serves it: the server runs the
// call to its end (and commits), then the connection is reset instead of
// answered, as a proxy or a network that drops does. The client sees a
// broken connection and cannot know whether the call committed.
//
//	d := &idemtest.HTTPDropper{Next: handler}
//	hs := httptest.NewServer(d)
//	d.Arm("publish") // the next call of publish loses its answer
//
// Serve it with a real HTTP server (net/http's, httptest's): the reset
// needs a connection.
type HTTPDropper struct {
	Next http.Handler

	mu      sync.Mutex     // guards armed and dropped
	armed   map[string]int // answers still to lose, per tool
	dropped int
}

// Arm makes the next call of tool lose its answer; arming it n times loses
// the next n.
func (d *HTTPDropper) Arm(tool string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed == nil {
		d.armed = map[string]int{}
	}
	d.armed[tool]++
}

// disarm takes back one Arm of tool that no call used.
func (d *HTTPDropper) disarm(tool string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed[tool]--; d.armed[tool] <= 0 {
		delete(d.armed, tool)
	}
}

// Dropped reports how many answers d has lost.
func (d *HTTPDropper) Dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

func (d *HTTPDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !d.anyArmed() {
		d.Next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !d.take(body) {
		d.Next.ServeHTTP(w, r)
		return
	}
	d.Next.ServeHTTP(httptest.NewRecorder(), r) // the call runs and commits; its answer stays here
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: the stream is reset instead
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // a reset, not a clean close
	}
	conn.Close()
}

func (d *HTTPDropper) anyArmed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.armed) > 0
}

// take reports whether body is a tools/call whose answer is to be lost, and
// counts it as lost.
func (d *HTTPDropper) take(body []byte) bool {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed[msg.Params.Name] == 0 {
		return false
	}
	if d.armed[msg.Params.Name]--; d.armed[msg.Params.Name] == 0 {
		delete(d.armed, msg.Params.Name)
	}
	d.dropped++
	return true
}
