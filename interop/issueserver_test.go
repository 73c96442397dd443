package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// An issue server in the shape of the go-sdk servers people run
// (github-mcp-server is the model): tools registered with srv.AddTool and
// raw mcp.ToolHandlers from the server's own little inventory, a handler
// middleware wrapped around every tool, a new mcp.Server built for every
// HTTP request (stateless streamable HTTP), and each write tool's whole
// effect one POST to a REST API. The server knows nothing of idemkit but
// the one line in newIssueServer.

// issueAPI is the REST API on loopback that the tools call, as GitHub's is
// to github-mcp-server: POST /issues, /comments and /pulls create and
// answer what they created, GET /issues lists the issues. It takes no
// idempotency key, as GitHub takes none, and counts what it created.
type issueAPI struct {
	srv *httptest.Server

	mu      sync.Mutex     // guards created
	created map[string]int // creates per path: "/issues", "/comments", "/pulls"
}

func newIssueAPI(t *testing.T) *issueAPI {
	a := &issueAPI{created: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *issueAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/issues":
		_ = json.NewEncoder(w).Encode(map[string]int{"total": a.created["/issues"]})
	case r.Method == http.MethodPost && (r.URL.Path == "/issues" || r.URL.Path == "/comments" || r.URL.Path == "/pulls"):
		var in map[string]any
		if json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(w, "a JSON object is required", http.StatusUnprocessableEntity)
			return
		}
		a.created[r.URL.Path]++
		n := a.created[r.URL.Path]
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"number": n, "url": fmt.Sprintf("%s%s/%d", a.srv.URL, r.URL.Path, n)})
	default:
		http.NotFound(w, r)
	}
}

// creates returns how many of path the API created.
func (a *issueAPI) creates(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.created[path]
}

// apiClient is what the handlers call the API with.
type apiClient struct{ base string }

// send sends one request with body as JSON and answers what the API
// answered and whether its status was 400 or more.
func (c apiClient) send(ctx context.Context, method, path string, body any) (text string, failed bool, err error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return "", false, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return "", false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(resp.Body); err != nil {
		return "", false, err
	}
	return out.String(), resp.StatusCode >= 400, nil
}

// do sends one request as send does and answers the tool result: the
// API's answer as text, an error result for a status of 400 or more.
func (c apiClient) do(ctx context.Context, method, path string, body any) (*mcp.CallToolResult, error) {
	text, failed, err := c.send(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: failed}, nil
}

// A serverTool is a tool and the function that makes its handler, as
// github-mcp-server's inventory holds them.
type serverTool struct {
	tool    mcp.Tool
	handler func(c apiClient) mcp.ToolHandler
}

// stringProp is a string property of an input schema.
func stringProp(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

// issueTools is the server's inventory.
func issueTools() []serverTool {
	post := func(path string, fields ...string) func(apiClient) mcp.ToolHandler {
		return func(c apiClient) mcp.ToolHandler {
			return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in map[string]any
				if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
					return nil, err
				}
				body := map[string]any{}
				for _, f := range fields {
					body[f] = in[f]
				}
				return c.do(ctx, http.MethodPost, path, body)
			}
		}
	}
	repo := map[string]*jsonschema.Schema{"owner": stringProp("Repository owner"), "repo": stringProp("Repository name")}
	props := func(more map[string]*jsonschema.Schema) map[string]*jsonschema.Schema {
		out := maps.Clone(repo)
		maps.Copy(out, more)
		return out
	}
	return []serverTool{
		{mcp.Tool{Name: "create_issue", Description: "Create a new issue in a repository.",
			Annotations: &mcp.ToolAnnotations{Title: "Create issue"},
			InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"owner", "repo", "title"},
				Properties: props(map[string]*jsonschema.Schema{"title": stringProp("Issue title"), "body": stringProp("Issue body")})}},
			post("/issues", "owner", "repo", "title", "body")},
		{mcp.Tool{Name: "add_issue_comment", Description: "Add a comment to an issue.",
			Annotations: &mcp.ToolAnnotations{Title: "Add comment to issue"},
			InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"owner", "repo", "issue_number", "body"},
				Properties: props(map[string]*jsonschema.Schema{"issue_number": {Type: "number", Description: "Issue number"}, "body": stringProp("Comment text")})}},
			post("/comments", "owner", "repo", "issue_number", "body")},
		{mcp.Tool{Name: "create_pull_request", Description: "Open a pull request.",
			Annotations: &mcp.ToolAnnotations{Title: "Open pull request"},
			InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"owner", "repo", "title", "head", "base"},
				Properties: props(map[string]*jsonschema.Schema{"title": stringProp("PR title"), "head": stringProp("Branch with the changes"), "base": stringProp("Branch to merge into")})}},
			post("/pulls", "owner", "repo", "title", "head", "base")},
		{mcp.Tool{Name: "list_issues", Description: "Count the issues of a repository.",
			Annotations: &mcp.ToolAnnotations{Title: "List issues", ReadOnlyHint: true},
			InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"owner", "repo"}, Properties: props(nil)}},
			func(c apiClient) mcp.ToolHandler {
				return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return c.do(ctx, http.MethodGet, "/issues", nil)
				}
			}},
	}
}

// registerAll adds every tool of the inventory to srv, each handler
// wrapped in mw, as github-mcp-server's inventory registers its tools.
func registerAll(srv *mcp.Server, c apiClient, mw func(mcp.ToolHandler) mcp.ToolHandler) {
	for _, st := range issueTools() {
		t := st.tool
		srv.AddTool(&t, mw(st.handler(c)))
	}
}

// toolCounts counts calls per tool; it is safe for concurrent use.
type toolCounts struct {
	mu sync.Mutex     // guards n
	n  map[string]int // calls per tool
}

func (c *toolCounts) add(tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[tool]++
}

// of returns how many calls of tool were counted.
func (c *toolCounts) of(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[tool]
}

// A handlerLog is the server's handler middleware: it counts every call
// that reaches a tool handler, as a logging or auth middleware sees it.
type handlerLog struct{ toolCounts }

func (l *handlerLog) middleware(next mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		l.add(req.Params.Name)
		return next(ctx, req)
	}
}

// guardedIssueTools are the per-tool settings of the protection (5 lines):
// a create is keyed by an op id its client must send, a comment by what it
// says, and a pull request takes an op id when its client sends one.
var guardedIssueTools = idem.Tools{
	"create_issue":        {idem.RequireOpID()},
	"add_issue_comment":   {idem.RecordKeys("owner", "repo", "issue_number", "body")},
	"create_pull_request": {idem.OpID()},
}

// newIssueServer builds the server for one HTTP request. guard is made
// once, outside it (issueHandler); nil serves the tools unprotected.
func newIssueServer(c apiClient, log *handlerLog, guard *idem.Guard) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "issues", Version: "v1"}, nil)
	registerAll(srv, c, log.middleware)
	if guard != nil { // the test's switch, to run the server both ways
		srv.AddReceivingMiddleware(guard.Middleware(guardedIssueTools)) // the one line a server adds
	}
	return srv
}

// issueHandler serves the issue server over stateless streamable HTTP, a
// new server per request, in front of api; with guard, protected.
func issueHandler(api *issueAPI, log *handlerLog, guard *idem.Guard) http.Handler {
	c := apiClient{base: api.srv.URL}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newIssueServer(c, log, guard) },
		&mcp.StreamableHTTPOptions{Stateless: true})
}

// goSDKIssueServer is the issue server as runOneLine runs it. Its handler
// middleware runs after the guard: it counts 2 runs of each write
// unprotected, 1 protected.
var goSDKIssueServer = oneLineServer{
	serve: func(api *issueAPI, guard *idem.Guard) (http.Handler, *toolCounts) {
		log := &handlerLog{}
		return issueHandler(api, log, guard), &log.toolCounts
	},
	counted:     "handler runs",
	wantCounted: func(guarded bool) int { return map[bool]int{false: 2, true: 1}[guarded] },
}
