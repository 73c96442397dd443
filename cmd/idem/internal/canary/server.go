// Package canary is the post-commit-disconnect canary: an MCP
// server whose tools commit and then lose their first answer, and a runner
// that drives a client policy through every case and prints one evidence
// record per case. Main is the `idem canary` command.
package canary

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// The canary's tools.
const (
	ToolIncrement = "increment_then_drop"
	ToolSetStatus = "set_status_then_drop"
	ToolLookup    = "lookup"
)

// droppable are the tools whose first answer in a run is lost.
var droppable = []string{ToolIncrement, ToolSetStatus, ToolLookup}

// A Drop is how the first answer of a tool is lost, after the tool
// committed. Both are seen in the field.
type Drop string

const (
	// DropReset resets the connection before any byte of the answer.
	DropReset Drop = "reset"
	// DropCut sends the answer's headers, then closes the connection: the
	// stream ends before the answer.
	DropCut Drop = "cut"
	// DropNone loses nothing.
	DropNone Drop = "none"
)

// Describe says what d does, for a person.
func (d Drop) Describe() string {
	switch d {
	case DropReset:
		return "connection reset before any byte of the answer"
	case DropCut:
		return "stream cut after the answer's headers"
	}
	return "no answer lost"
}

// Annotations say what the canary's tools/list tells of its tools.
type Annotations string

const (
	// Declared: the hints the tools declare (increment_then_drop
	// idempotentHint: false, set_status_then_drop idempotentHint: true,
	// lookup readOnlyHint: true).
	Declared Annotations = "declared"
	// Missing: no annotations at all.
	Missing Annotations = "missing"
	// Replaced: declared until the first lost answer of the run, missing
	// after it, as a replacement server that lost them would say on
	// reconnect.
	Replaced Annotations = "replaced"
)

// Config is how a run of the canary behaves. A request's URL query (drop=,
// annotations=) overrides the server's default for it.
type Config struct {
	Drop        Drop
	Annotations Annotations
}

func (c Config) valid() error {
	switch c.Drop {
	case DropReset, DropCut, DropNone:
	default:
		return fmt.Errorf("drop must be %s, %s or %s", DropReset, DropCut, DropNone)
	}
	switch c.Annotations {
	case Declared, Missing, Replaced:
	default:
		return fmt.Errorf("annotations must be %s, %s or %s", Declared, Missing, Replaced)
	}
	return nil
}

// Stats is what a run of the canary saw, from GET /stats/RUN.
type Stats struct {
	// Invocations counts the handler runs of each tool.
	Invocations map[string]int `json:"invocations"`
	// Received counts the tools/call requests of each tool.
	Received map[string]int `json:"received"`
	// Dropped lists the tools whose first answer was lost.
	Dropped []string `json:"dropped"`
	// ToolLists counts tools/list requests; Replaced says the annotations
	// were dropped after a lost answer.
	ToolLists int  `json:"tool_lists"`
	Replaced  bool `json:"replaced"`
	// Counter is increment_then_drop's durable counter and StatusChanges
	// the number of times set_status_then_drop changed a status, from the
	// store.
	Counter       int `json:"counter"`
	StatusChanges int `json:"status_changes"`
}

// run is the state of one run: a path /mcp/RUN of the canary.
type run struct {
	invocations map[string]int
	received    map[string]int
	dropped     map[string]bool
	lists       int
	replaced    bool
}

// Server is the canary server. Each run (the path /mcp/RUN; /mcp is run
// "default") has its own counters and drops the first answer of each tool
// once.
type Server struct {
	store    idem.Store
	defaults Config
	srv      *mcp.Server
	mcp      http.Handler

	mu   sync.Mutex // guards runs
	runs map[string]*run
}

// Headers the HTTP layer sets for the MCP layer; a client's own are
// removed.
const (
	headerRun         = "Idem-Canary-Run"
	headerAnnotations = "Idem-Canary-Annotations"
)

// NewServer returns a canary on store s with the defaults d.
func NewServer(s idem.Store, d Config) (*Server, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	c := &Server{store: s, defaults: d, runs: map[string]*run{}}
	c.srv = mcp.NewServer(&mcp.Implementation{Name: "idem-canary", Version: "v0.1.0"}, nil)
	c.addTools()
	idem.RegisterStatusTool(c.srv, s)
	c.srv.AddReceivingMiddleware(c.observe)
	c.mcp = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return c.srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	return c, nil
}

func (c *Server) runLocked(id string) *run {
	r := c.runs[id]
	if r == nil {
		r = &run{invocations: map[string]int{}, received: map[string]int{}, dropped: map[string]bool{}}
		c.runs[id] = r
	}
	return r
}

// invoked counts a handler run of tool in the run of req.
func (c *Server) invoked(req *mcp.CallToolRequest, tool string) string {
	id := req.Extra.Header.Get(headerRun)
	c.mu.Lock()
	c.runLocked(id).invocations[tool]++
	c.mu.Unlock()
	return id
}

// observe counts tools/call and tools/list requests, and takes the
// annotations out of tools/list where the run says so.
func (c *Server) observe(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		extra := req.GetExtra()
		if extra == nil || extra.Header == nil {
			return next(ctx, method, req)
		}
		id := extra.Header.Get(headerRun)
		c.mu.Lock()
		r := c.runLocked(id)
		switch method {
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				r.received[p.Name]++
			}
		case "tools/list":
			r.lists++
		}
		strip := Annotations(extra.Header.Get(headerAnnotations)) == Missing || r.replaced
		c.mu.Unlock()
		res, err := next(ctx, method, req)
		if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil && strip {
			for i, t := range lt.Tools {
				bare := *t
				bare.Annotations = nil
				lt.Tools[i] = &bare
			}
		}
		return res, err
	}
}

// runID is the form of a run's name in a path.
var runID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,80}$`)

// ServeHTTP serves MCP at /mcp and /mcp/RUN, and a run's Stats as JSON at
// /stats/RUN.
func (c *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, id, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if id == "" {
		id = "default"
	}
	if !runID.MatchString(id) || (kind != "mcp" && kind != "stats") {
		http.Error(w, "404 not found: the canary serves MCP at /mcp or /mcp/RUN and counts at /stats/RUN", http.StatusNotFound)
		return
	}
	if kind == "stats" {
		c.serveStats(w, r, id)
		return
	}
	cfg := c.defaults
	q := r.URL.Query()
	if v := q.Get("drop"); v != "" {
		cfg.Drop = Drop(v)
	}
	if v := q.Get("annotations"); v != "" {
		cfg.Annotations = Annotations(v)
	}
	if err := cfg.valid(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Header.Set(headerRun, id)
	r.Header.Set(headerAnnotations, string(cfg.Annotations))
	if !c.claimDrop(r, id, cfg) {
		c.mcp.ServeHTTP(w, r)
		return
	}
	dropAnswer(w, r, c.mcp, cfg.Drop, func() {
		if cfg.Annotations == Replaced {
			c.mu.Lock()
			c.runLocked(id).replaced = true
			c.mu.Unlock()
		}
	})
}

// claimDrop reports whether r is a call whose answer is to be lost: the
// first call of a droppable tool in the run. It marks it lost.
func (c *Server) claimDrop(r *http.Request, id string, cfg Config) bool {
	if cfg.Drop == DropNone || r.Method != http.MethodPost {
		return false
	}
	tool := calledTool(r)
	if !slices.Contains(droppable, tool) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.runLocked(id)
	if rs.dropped[tool] {
		return false
	}
	rs.dropped[tool] = true
	return true
}

func (c *Server) serveStats(w http.ResponseWriter, r *http.Request, id string) {
	st, err := c.Stats(r.Context(), id)
	if err != nil {
		http.Error(w, "the store cannot be read", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// Stats returns what run id saw so far.
func (c *Server) Stats(ctx context.Context, id string) (Stats, error) {
	c.mu.Lock()
	r := c.runLocked(id)
	st := Stats{Invocations: maps.Clone(r.invocations), Received: maps.Clone(r.received),
		Dropped: slices.Sorted(maps.Keys(r.dropped)), ToolLists: r.lists, Replaced: r.replaced}
	c.mu.Unlock()
	err := c.store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		var n, ch counter
		if _, err := get(ctx, tx, counterKey(id), &n); err != nil {
			return err
		}
		if _, err := get(ctx, tx, changesKey(id), &ch); err != nil {
			return err
		}
		st.Counter, st.StatusChanges = n.N, ch.N
		return nil
	})
	return st, err
}
