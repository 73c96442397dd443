package interop_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// TestOneLineProtectsIssueServer drives the issue server of
// issueserver_test.go with real clients, the TypeScript SDK's v1 and v2
// and the go-sdk's, and loses the answer to each write tool's first call
// after the API created (the connection reset by an HTTPDropper), then
// sends the call again on a new connection, as a client does.
//
// Unprotected, each write reaches the API twice: 2 creates per tool.
// Protected, 1 create per tool, and the resend is the first answer
// replayed. What the server added for it: the settings of
// guardedIssueTools (5 lines), the guard made once per process (1 line,
// in runOneLine), and 1 line in newIssueServer; no handler, schema or
// registration changed.
func TestOneLineProtectsIssueServer(t *testing.T) {
	runOneLine(t, goSDKIssueServer)
}

// A oneLineServer is one library's issue server as runOneLine runs it.
type oneLineServer struct {
	// serve answers the server in front of api, protected by guard unless
	// guard is nil, and the counts of the server's own middleware.
	serve func(api *issueAPI, guard *idem.Guard) (http.Handler, *toolCounts)
	// counted says what the middleware counts, for failures.
	counted string
	// wantCounted is how many calls of each write the middleware counts.
	wantCounted func(guarded bool) int
	// listed, unless nil, checks more of tools/list as the TypeScript
	// clients see it.
	listed func(t *testing.T, o outcome)
}

// runOneLine runs the one-line test on the server s, unprotected and
// protected, with each client: the answer to each write tool's first call
// is lost after the API created, and the call sent again on a new
// connection.
func runOneLine(t *testing.T, s oneLineServer) {
	for _, guarded := range []bool{false, true} {
		for _, cl := range []client{nodeClient{sdk: "v1", timeout: nodeTimeout}, nodeClient{sdk: "v2", timeout: nodeTimeout}, goSDKClient{}} {
			t.Run(fmt.Sprintf("guarded=%v/%s", guarded, cl.name()), func(t *testing.T) {
				api := newIssueAPI(t)
				var guard *idem.Guard
				if guarded {
					guard = idem.New(memory.New(nil), nil) // once per process
				}
				h, counts := s.serve(api, guard)
				hs := idemtest.NewHTTPServer(h)
				defer hs.Close()
				if _, ok := cl.(nodeClient); ok {
					needNode(t)
					list := resentByNode(t, cl, hs, guarded)
					listedAsGuarded(t, list, guarded)
					if s.listed != nil {
						s.listed(t, list)
					}
				} else {
					resentByGoSDK(t, hs, guarded)
				}
				want := map[bool]int{false: 2, true: 1}[guarded]
				for _, w := range issueWrites {
					if n := api.creates(w.path); n != want {
						t.Errorf("%s: the API created %d, want %d", w.tool, n, want)
					}
					if n, want := counts.of(w.tool), s.wantCounted(guarded); n != want {
						t.Errorf("%s: %d %s, want %d", w.tool, n, s.counted, want)
					}
					t.Logf("%s: %d created upstream", w.tool, api.creates(w.path))
				}
				if hs.Dropper.Dropped() != len(issueWrites) {
					t.Errorf("%d answers lost, want %d", hs.Dropper.Dropped(), len(issueWrites))
				}
			})
		}
	}
}

// issueWrites are the write tools the test loses an answer of, with the
// arguments sent (op_id where the tool takes one; an unprotected server
// ignores it) and the API path they post to.
var issueWrites = []struct {
	tool, path string
	args       map[string]any
}{
	{"create_issue", "/issues", map[string]any{"owner": "acme", "repo": "app", "title": "Crash on start", "body": "Since 2.3.", "op_id": "op-issue-1"}},
	{"add_issue_comment", "/comments", map[string]any{"owner": "acme", "repo": "app", "issue_number": 1, "body": "Fixed in #2."}},
	{"create_pull_request", "/pulls", map[string]any{"owner": "acme", "repo": "app", "title": "Fix the crash", "head": "fix", "base": "main", "op_id": "op-pr-1"}},
}

// resentByNode runs the TypeScript client cl: a session per write whose
// answer is lost, then a new session that lists the tools and sends every
// write again. It answers what that session listed.
func resentByNode(t *testing.T, cl client, hs *idemtest.HTTPServer, guarded bool) outcome {
	var p plan
	last := session{Steps: []step{list("list")}}
	for _, w := range issueWrites {
		hs.Dropper.Arm(w.tool)
		p.Sessions = append(p.Sessions, session{Steps: []step{call("lost "+w.tool, w.tool, w.args)}})
		last.Steps = append(last.Steps, call(w.tool, w.tool, w.args))
	}
	p.Sessions = append(p.Sessions, last)
	out, err := cl.run(testContext(t), target{transport: "http", url: hs.URL + "/"}, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range issueWrites {
		if o := out["lost "+w.tool]; o.Error == nil {
			t.Fatalf("%s: the first call was answered (%s); its answer was to be lost", w.tool, o.Result)
		}
		r := result(t, out, w.tool)
		resent(t, w.tool, guarded, r.IsError, r.replayed(), r.text())
	}
	return out["list"]
}

// resentByGoSDK does the same with the go-sdk client, through idemtest.
func resentByGoSDK(t *testing.T, hs *idemtest.HTTPServer, guarded bool) {
	for _, w := range issueWrites {
		res, err := hs.DropAndRetry(testContext(t), &mcp.CallToolParams{Name: w.tool, Arguments: w.args})
		if err != nil {
			t.Fatalf("%s: %v", w.tool, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		resent(t, w.tool, guarded, res.IsError, res.Meta[idem.MetaReplayed] == true, text.String())
	}
}

// resent checks the answer to a write sent again after its answer was
// lost: the first create replayed when guarded, a second create when not.
func resent(t *testing.T, tool string, guarded, isError, replayed bool, text string) {
	t.Helper()
	number := map[bool]string{false: `"number":2`, true: `"number":1`}[guarded]
	if isError || replayed != guarded || !strings.Contains(text, number) {
		t.Errorf("%s sent again: error %v, replayed %v, %q; want %s, replayed %v", tool, isError, replayed, text, number, guarded)
	}
}

// listedAsGuarded checks tools/list as a client sees it: idempotentHint
// true only on the tools guarded with record keys or a required op id,
// op_id in the input schema of the tools that take one (required where
// the tool requires it), get_operation listed; unprotected, none of it.
func listedAsGuarded(t *testing.T, o outcome, guarded bool) {
	t.Helper()
	type want struct{ idempotent, opID, opIDRequired bool }
	wants := map[string]want{"create_issue": {}, "add_issue_comment": {}, "create_pull_request": {}, "list_issues": {}}
	if guarded {
		wants["create_issue"] = want{idempotent: true, opID: true, opIDRequired: true}
		wants["add_issue_comment"] = want{idempotent: true}
		wants["create_pull_request"] = want{opID: true}
	}
	for name, w := range wants {
		tool := listedTool(t, o, name)
		ann, _ := tool["annotations"].(map[string]any)
		schema, _ := tool["inputSchema"].(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		required, _ := schema["required"].([]any)
		_, opID := props["op_id"]
		got := want{idempotent: ann["idempotentHint"] == true, opID: opID, opIDRequired: slices.Contains(required, any("op_id"))}
		if got != w {
			t.Errorf("%s listed as %+v, want %+v", name, got, w)
		}
	}
	var status map[string]any
	for _, tool := range o.Tools {
		if tool["name"] == "get_operation" {
			status = tool
		}
	}
	switch {
	case guarded && status == nil:
		t.Error("get_operation not listed")
	case guarded:
		if ann, _ := status["annotations"].(map[string]any); ann["readOnlyHint"] != true {
			t.Errorf("get_operation listed as %v, want read-only", status["annotations"])
		}
	case status != nil:
		t.Error("get_operation listed by the unprotected server")
	}
}
