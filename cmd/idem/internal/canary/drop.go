package canary

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
)

// maxBody bounds how much of a request the canary reads to find the tool
// it calls.
const maxBody = 1 << 20

// calledTool returns the tool r calls, or "" when r is not a tools/call
// request. It leaves r's body readable.
func calledTool(r *http.Request) string {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return ""
	}
	return msg.Params.Name
}

// captured is a ResponseWriter that keeps the answer instead of sending
// it.
type captured struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }
func (c *captured) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}
func (c *captured) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}
func (c *captured) Flush() {}

// dropAnswer serves r with h, so that the tool runs and commits, then
// loses the answer as d says instead of sending it; lost runs once the
// answer is lost, before the connection closes.
func dropAnswer(w http.ResponseWriter, r *http.Request, h http.Handler, d Drop, lost func()) {
	c := &captured{header: http.Header{}}
	h.ServeHTTP(c, r)
	rc := http.NewResponseController(w)
	if d == DropCut {
		for k, v := range c.header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(max(c.status, http.StatusOK))
		if err := rc.Flush(); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
	lost()
	conn, _, err := rc.Hijack()
	if err != nil {
		// No connection to take over (HTTP/2): abort the stream.
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok && d == DropReset {
		tcp.SetLinger(0) // close with RST, not FIN
	}
	conn.Close()
}
