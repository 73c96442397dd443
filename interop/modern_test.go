package interop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modern is the protocol revision without the initialize handshake: a
// client opens with server/discover, every request carries its protocol
// version in _meta and in the Mcp-Protocol-Version header, and change
// notifications come on a subscriptions/listen stream. Claude Code speaks
// it to a stateless server.
const modern = "2026-07-28"

// modernClients are the clients here that speak protocol 2026-07-28 (read
// from their code): the go-sdk's own client by default (it falls back to
// initialize only when server/discover fails), the TypeScript v2 client
// pinned to it (versionNegotiation { mode: { pin } }: no fallback), and
// mcp-go's default client. The TypeScript v1 client (1.32.2, latest
// 2025-11-25) and the Inspector's CLI (built on it) do not.
func modernClients() []client {
	return []client{goSDKClient{}, nodeClient{sdk: "v2", negotiation: "pin:" + modern}, mcpGoClient{label: "mcpgo"}}
}

// A modernCase is a stateless example and the calls the 2026-07-28 clients
// make to it: a write with an op id, and a keyed write.
type modernCase struct {
	name  string
	bin   func() string
	args  func(t *testing.T) []string
	write step // carries an op_id argument
	keyed step // keyed by a record key, no op id
}

func modernCases() []modernCase {
	return []modernCase{
		{"quickstart", func() string { return bins.quickstart }, quickstartArgs,
			call("write", "add_expense", firstExpense),
			call("keyed", "set_budget", map[string]any{"month": "2026-03", "amount_cents": 40000})},
		{"quickstart-mcpgo", func() string { return bins.quickstartMCPGo }, quickstartArgs,
			call("write", "add_expense", firstExpense),
			call("keyed", "set_budget", map[string]any{"month": "2026-03", "amount_cents": 40000})},
		{"focus", func() string { return bins.focus }, focusArgs,
			focusStep("write", "start"), withoutOpID(focusStep("keyed", "log"))},
		{"stories", func() string { return bins.stories }, storiesArgs,
			call("write", storiesWrites[0].Name, storiesWrites[0].Arguments), withoutOpID(call("keyed", storiesWrites[0].Name, storiesWrites[0].Arguments))},
	}
}

// focusStep is a call of focusWrites' write id, as step id.
func focusStep(id, write string) step {
	for _, w := range focusWrites {
		if w.id == write {
			return call(id, w.tool, w.args)
		}
	}
	panic("no focus write " + write)
}

// withoutOpID returns s with no op_id argument.
func withoutOpID(s step) step {
	s.Arguments = maps.Clone(s.Arguments)
	delete(s.Arguments, "op_id")
	return s
}

// modernPlan is what an agent on protocol 2026-07-28 does, twice: discover
// (on connect), listen for tool list changes, list the tools, write, resend
// the write with the same op id, ask get_operation about it, write a keyed
// record twice; then, as a new client on a new connection, resend the
// write and ask get_operation again.
func modernPlan(c modernCase) plan {
	opID, _ := c.write.Arguments["op_id"].(string)
	status := map[string]any{"tool": c.write.Name, "op_id": opID}
	again := func(id string, s step) step { s.ID = id; return s }
	return plan{Sessions: []session{
		{Steps: []step{
			listen("listen"),
			list("list"),
			c.write,
			again("write_replay", c.write),
			call("status", "get_operation", status),
			c.keyed,
			again("keyed_again", c.keyed),
		}},
		{Steps: []step{
			again("write_new_session", c.write),
			call("status_new_session", "get_operation", status),
		}},
	}}
}

// TestModernProtocol drives the stateless HTTP examples with every client
// that speaks protocol 2026-07-28, through a wire that records what they
// send: the calls must work on that protocol (no initialize, the version
// on every request) and a resend must replay, on the same and on a new
// connection.
func TestModernProtocol(t *testing.T) {
	for _, c := range modernCases() {
		for _, cl := range modernClients() {
			t.Run(c.name+"/"+cl.name(), func(t *testing.T) {
				t.Parallel()
				if _, ok := cl.(nodeClient); ok {
					needNode(t)
				}
				w := newWire(t, startHTTP(t, c.bin(), c.args(t)...))
				p := modernPlan(c)
				out, err := cl.run(testContext(t), target{transport: "http", url: w.url}, p)
				if err != nil {
					t.Fatal(err)
				}
				t.Run("on_2026-07-28", func(t *testing.T) { spokeModern(t, w.requests(), len(p.Sessions)) })
				t.Run("listen", func(t *testing.T) {
					for id, o := range out {
						if strings.HasPrefix(id, "listen") && o.Error != nil {
							t.Errorf("%s: %s", id, o.Error.Message)
						}
					}
				})
				t.Run("tools", func(t *testing.T) { listsTools(t, out["list"], c.write.Name, c.keyed.Name, "get_operation") })
				t.Run("replay", func(t *testing.T) {
					if r := result(t, out, "write"); r.IsError || r.replayed() {
						t.Fatalf("first write: %s", r.raw)
					}
					sameAnswerReplayed(t, out, "write", "write_replay")
					sameAnswerReplayed(t, out, "write", "write_new_session")
				})
				t.Run("get_operation", func(t *testing.T) {
					for _, id := range []string{"status", "status_new_session"} {
						committed(t, out, id, result(t, out, "write"))
					}
				})
				t.Run("keyed", func(t *testing.T) {
					a, b := result(t, out, "keyed"), result(t, out, "keyed_again")
					if a.IsError || b.IsError || a.structured() != b.structured() {
						t.Errorf("the keyed write twice: %s then %s, want one answer twice", a.raw, b.raw)
					}
				})
				t.Run("every_error_has_code", func(t *testing.T) { everyErrorHasCode(t, out) })
			})
		}
	}
}

// spokeModern fails t unless the requests are a 2026-07-28 conversation
// of sessions connections: a server/discover per connection, no
// initialize, the version in the header of every request and in the _meta
// of every call, and a subscriptions/listen.
func spokeModern(t *testing.T, reqs []wireRequest, sessions int) {
	t.Helper()
	var discovers, listens int
	said := map[string]bool{}
	errorf := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !said[msg] {
			said[msg] = true
			t.Error(msg)
		}
	}
	for _, r := range reqs {
		switch r.Method {
		case "server/discover":
			discovers++
		case "subscriptions/listen":
			listens++
		case "initialize", "notifications/initialized":
			errorf("the client sent %s: it fell back to the handshake before 2026-07-28", r.Method)
		}
		if r.HTTPMethod != "POST" {
			errorf("%s request: 2026-07-28 has only POSTs", r.HTTPMethod)
			continue
		}
		if r.HeaderVersion != modern {
			errorf("%s: Mcp-Protocol-Version %q, want %s", r.Method, r.HeaderVersion, modern)
		}
		if !strings.HasPrefix(r.Method, "notifications/") && r.MetaVersion != modern {
			errorf("%s: _meta protocolVersion %q, want %s", r.Method, r.MetaVersion, modern)
		}
	}
	if discovers != sessions {
		t.Errorf("%d server/discover requests, want one for each of %d connections", discovers, sessions)
	}
	if listens == 0 {
		t.Errorf("no subscriptions/listen request")
	}
	if len(reqs) > 0 && reqs[0].Method != "server/discover" {
		t.Errorf("the first request is %q, want server/discover", reqs[0].Method)
	}
}

// committed fails t unless step id is a get_operation answer "committed"
// whose output is the structured content of first.
func committed(t *testing.T, out map[string]outcome, id string, first callResult) {
	t.Helper()
	r := result(t, out, id)
	var st struct {
		Status string `json:"status"`
		Output any    `json:"output"`
	}
	if err := remarshal(r.StructuredContent, &st); err != nil || r.IsError || st.Status != "committed" {
		t.Fatalf("%s: %s, want status committed", id, r.raw)
	}
	if b, _ := json.Marshal(st.Output); string(b) != first.structured() {
		t.Errorf("%s: output %s, want the first answer %s", id, b, first.structured())
	}
}

// goSDKClient runs the plan with the official Go SDK's client (go-sdk
// v1.8.0, the module's own), over streamable HTTP or stdio. It opens every
// connection with server/discover at 2026-07-28 and falls back to
// initialize only when the server cannot serve that version. It opens
// subscriptions/listen on connect, when the session has a "listen" step.
type goSDKClient struct{}

func (goSDKClient) name() string { return "go-sdk" }

func (goSDKClient) run(ctx context.Context, tg target, p plan) (map[string]outcome, error) {
	out := make(map[string]outcome)
	for _, s := range p.Sessions {
		opts := &mcp.ClientOptions{}
		if slices.ContainsFunc(s.Steps, func(st step) bool { return st.Op == "listen" }) {
			opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {}
		}
		cl := mcp.NewClient(&mcp.Implementation{Name: "idemkit-interop-go-sdk", Version: "0.0.0"}, opts)
		var tr mcp.Transport
		switch tg.transport {
		case "http":
			tr = &mcp.StreamableClientTransport{Endpoint: tg.url}
		case "stdio":
			tr = &mcp.CommandTransport{Command: exec.Command(tg.command[0], tg.command[1:]...)}
		default:
			return nil, fmt.Errorf("unknown transport %q", tg.transport)
		}
		cs, err := cl.Connect(ctx, tr, nil)
		if err != nil {
			for _, st := range s.Steps {
				out[st.ID] = outcome{Error: &clientError{Message: "connect: " + err.Error()}}
			}
			continue
		}
		for _, st := range s.Steps {
			out[st.ID] = runGoSDKStep(ctx, cs, st)
		}
		cs.Close()
	}
	return out, nil
}

func runGoSDKStep(ctx context.Context, cs *mcp.ClientSession, st step) outcome {
	fail := func(err error) outcome { return outcome{Error: &clientError{Message: err.Error()}} }
	switch st.Op {
	case "listen":
		return outcome{} // opened by Connect
	case "list":
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return fail(err)
		}
		var o outcome
		if err := remarshal(res.Tools, &o.Tools); err != nil {
			return fail(err)
		}
		return o
	case "call":
		if st.Parallel > 0 {
			return fail(fmt.Errorf("parallel calls are not run by this client"))
		}
		params := &mcp.CallToolParams{Name: st.Name, Arguments: st.Arguments}
		if st.Meta != nil {
			params.Meta = mcp.Meta(st.Meta)
		}
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return fail(err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			return fail(err)
		}
		return outcome{Result: b}
	}
	return fail(fmt.Errorf("unknown op %s", st.Op))
}
