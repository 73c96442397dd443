package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/internal/testenv"
)

// A plan is what a client does: sessions one after the other, each a new
// connection (over stdio, a new server process), each running its steps in
// order. node/client.mjs reads the same plan as JSON.
type plan struct {
	Sessions []session `json:"sessions"`
}

type session struct {
	Steps []step `json:"steps"`
}

// A step lists the tools ("list") or calls one ("call") with Arguments and
// the request's _meta, Parallel copies at once when Parallel > 0.
type step struct {
	ID        string         `json:"id"`
	Op        string         `json:"op"`
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Meta      map[string]any `json:"meta,omitempty"` // the request's _meta
	Parallel  int            `json:"parallel,omitempty"`
}

func list(id string) step { return step{ID: id, Op: "list"} }

// listen opens a subscriptions/listen stream for tool list changes
// (protocol 2026-07-28), as Claude Code does after server/discover; it
// stays open until the session ends.
func listen(id string) step { return step{ID: id, Op: "listen"} }

func call(id, name string, args map[string]any) step {
	return step{ID: id, Op: "call", Name: name, Arguments: args}
}

// callMeta is call with an op id in _meta["io.idemkit/op_id"].
func callMeta(id, name string, args map[string]any, opID string) step {
	return step{ID: id, Op: "call", Name: name, Arguments: args, Meta: map[string]any{"io.idemkit/op_id": opID}}
}

// An outcome is what a client got for a step, as raw as the client gives it.
type outcome struct {
	Tools   []map[string]any `json:"tools,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Results []outcome        `json:"results,omitempty"`
	Error   *clientError     `json:"error,omitempty"`
}

// A clientError is an error the client raised instead of returning a result.
type clientError struct {
	Message string `json:"message"`
	Code    any    `json:"code,omitempty"`
	Data    any    `json:"data,omitempty"`
}

// A client runs a plan against a target.
type client interface {
	name() string
	run(ctx context.Context, tg target, p plan) (map[string]outcome, error)
}

// nodeClient runs node/client.mjs with one of the TypeScript SDKs.
type nodeClient struct {
	sdk         string        // "v1" or "v2"
	negotiation string        // v2: "", "legacy", "auto" or "pin:VERSION"
	timeout     time.Duration // a call's request timeout; 0: the SDK's (60 s)
}

func (c nodeClient) name() string {
	if c.negotiation != "" {
		return c.sdk + "-" + c.negotiation
	}
	return c.sdk
}

func (c nodeClient) run(ctx context.Context, tg target, p plan) (map[string]outcome, error) {
	in, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	args := []string{"client.mjs", "--sdk", c.sdk, "--transport", tg.transport}
	if c.negotiation != "" {
		args = append(args, "--negotiation", c.negotiation)
	}
	if c.timeout > 0 {
		args = append(args, "--timeout", strconv.FormatInt(c.timeout.Milliseconds(), 10))
	}
	if tg.transport == "http" {
		args = append(args, "--url", tg.url)
	} else {
		args = append(append(args, "--"), tg.command...)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = nodeDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node %v: %v\n%s", args, err, stderr.Bytes())
	}
	var out struct {
		Steps map[string]outcome `json:"steps"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("reading client.mjs output: %v\n%s", err, stdout.Bytes())
	}
	return out.Steps, nil
}

// nodeDir is the Node project, relative to this package's directory (go
// test runs in it).
const nodeDir = "node"

// needNode skips t, or fails it when CI is set, unless node and the
// installed packages of the Node project are there.
func needNode(t *testing.T) {
	t.Helper()
	var missing error
	if _, err := exec.LookPath("node"); err != nil {
		missing = err
	} else {
		for _, pkg := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/client"} {
			if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", pkg, "package.json")); err != nil {
				missing = fmt.Errorf("%v (run npm ci in interop/node)", err)
			}
		}
	}
	if missing == nil {
		return
	}
	if testenv.InCI() {
		t.Fatalf("the TypeScript clients cannot run: %v", missing)
	}
	t.Skipf("the TypeScript clients cannot run: %v", missing)
}

// mcpGoClient runs the plan with the mcp-go client.
type mcpGoClient struct {
	label string
	opts  []mcpgoclient.ClientOption
}

func (c mcpGoClient) name() string { return c.label }

func (c mcpGoClient) run(ctx context.Context, tg target, p plan) (map[string]outcome, error) {
	out := make(map[string]outcome)
	for _, s := range p.Sessions {
		cl, err := c.connect(ctx, tg)
		if err != nil {
			for _, st := range s.Steps {
				out[st.ID] = outcome{Error: &clientError{Message: "connect: " + err.Error()}}
			}
			continue
		}
		var listens []func() error
		for _, st := range s.Steps {
			if st.Op == "listen" {
				listens = append(listens, listenMCPGo(ctx, cl))
				out[st.ID] = outcome{}
				continue
			}
			out[st.ID] = runMCPGoStep(ctx, cl, st)
		}
		for i, stop := range listens {
			if err := stop(); err != nil {
				out[fmt.Sprintf("listen#%d", i)] = outcome{Error: &clientError{Message: "subscriptions/listen: " + err.Error()}}
			}
		}
		cl.Close()
	}
	return out, nil
}

// listenMCPGo opens a subscriptions/listen stream for tool list changes on
// cl; stop closes it and returns what ended it, if not stop itself.
func listenMCPGo(ctx context.Context, cl *mcpgoclient.Client) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- cl.Listen(ctx, mcpgo.SubscriptionFilter{ToolsListChanged: true}) }()
	return func() error {
		select {
		case err := <-ended: // ended before the session did
			cancel()
			if err == nil {
				err = errors.New("the server ended the stream")
			}
			return err
		default:
		}
		cancel()
		<-ended
		return nil
	}
}

// connect starts a client session on tg and initializes it.
func (c mcpGoClient) connect(ctx context.Context, tg target) (*mcpgoclient.Client, error) {
	var tr transport.Interface
	switch tg.transport {
	case "stdio":
		tr = transport.NewStdio(tg.command[0], nil, tg.command[1:]...)
	case "http":
		h, err := transport.NewStreamableHTTP(tg.url)
		if err != nil {
			return nil, err
		}
		tr = h
	default:
		return nil, fmt.Errorf("unknown transport %q", tg.transport)
	}
	cl := mcpgoclient.NewClient(tr, c.opts...)
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ClientInfo = mcpgo.Implementation{Name: "idemkit-interop-mcp-go", Version: "0.0.0"}
	if _, err := cl.Initialize(ctx, req); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

func runMCPGoStep(ctx context.Context, cl *mcpgoclient.Client, st step) outcome {
	switch st.Op {
	case "list":
		res, err := cl.ListTools(ctx, mcpgo.ListToolsRequest{})
		if err != nil {
			return outcome{Error: &clientError{Message: err.Error()}}
		}
		var o outcome
		if err := remarshal(res.Tools, &o.Tools); err != nil {
			return outcome{Error: &clientError{Message: err.Error()}}
		}
		return o
	case "call":
		once := func() outcome {
			req := mcpgo.CallToolRequest{}
			req.Params.Name = st.Name
			req.Params.Arguments = st.Arguments
			if st.Meta != nil {
				req.Params.Meta = &mcpgo.Meta{AdditionalFields: st.Meta}
			}
			res, err := cl.CallTool(ctx, req)
			if err != nil {
				return outcome{Error: &clientError{Message: err.Error()}}
			}
			b, err := json.Marshal(res)
			if err != nil {
				return outcome{Error: &clientError{Message: err.Error()}}
			}
			return outcome{Result: b}
		}
		if st.Parallel == 0 {
			return once()
		}
		results := make([]outcome, st.Parallel)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() { results[i] = once() })
		}
		wg.Wait()
		return outcome{Results: results}
	}
	return outcome{Error: &clientError{Message: "unknown op " + st.Op}}
}

// remarshal copies v into out through JSON.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// A callResult is the part of a tool result the checks read.
type callResult struct {
	Meta              map[string]any `json:"_meta"`
	Content           []contentBlock `json:"content"`
	StructuredContent any            `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	raw               []byte
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// result returns the tool result of step id, failing t when the client
// raised an error or the step did not run.
func result(t *testing.T, out map[string]outcome, id string) callResult {
	t.Helper()
	o, ok := out[id]
	if !ok {
		t.Fatalf("step %s: no outcome", id)
	}
	return resultOf(t, id, o)
}

func resultOf(t *testing.T, id string, o outcome) callResult {
	t.Helper()
	if o.Error != nil {
		t.Fatalf("step %s: the client raised %q (code %v), want a tool result", id, o.Error.Message, o.Error.Code)
	}
	if len(o.Result) == 0 {
		t.Fatalf("step %s: no result", id)
	}
	var r callResult
	if err := json.Unmarshal(o.Result, &r); err != nil {
		t.Fatalf("step %s: %v", id, err)
	}
	r.raw = o.Result
	return r
}

// text returns the text blocks of r, joined.
func (r callResult) text() string {
	var b bytes.Buffer
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// code returns _meta["io.idemkit/error"] of r, or "".
func (r callResult) code() string {
	s, _ := r.Meta["io.idemkit/error"].(string)
	return s
}

func (r callResult) replayed() bool { return r.Meta["io.idemkit/replayed"] == true }

// structured returns r's structured content as canonical JSON.
func (r callResult) structured() string {
	b, _ := json.Marshal(r.StructuredContent)
	return string(b)
}
