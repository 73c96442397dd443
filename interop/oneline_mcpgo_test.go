package interop_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// TestOneLineProtectsMCPGoIssueServer is TestOneLineProtectsIssueServer on
// the mcp-go issue server of issueserver_mcpgo_test.go: the TypeScript
// SDK's v1 and v2 clients and the go-sdk's lose the answer to each write
// tool's first call after the API created (the connection reset by an
// HTTPDropper), then send the call again on a new connection.
//
// Unprotected, each write reaches the API twice: 2 creates per tool.
// Protected, 1 create per tool, and the resend is the first answer
// replayed. The server's own middleware sees both calls either way. What
// the server added for it: the settings of guardedIssueTools (5 lines,
// shared with the go-sdk server), the guard made once per process (1
// line, below), and 1 option in newMCPGoIssueServer, with the imports of
// idem, idem/mcpgo and a store (3 lines); no handler, tool definition or
// registration changed.
func TestOneLineProtectsMCPGoIssueServer(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		for _, cl := range []client{nodeClient{sdk: "v1", timeout: nodeTimeout}, nodeClient{sdk: "v2", timeout: nodeTimeout}, goSDKClient{}} {
			t.Run(fmt.Sprintf("guarded=%v/%s", guarded, cl.name()), func(t *testing.T) {
				api, log := newIssueAPI(t), &toolCallLog{}
				var guard *idem.Guard
				if guarded {
					guard = idem.New(memory.New(nil), nil) // once per process
				}
				hs := idemtest.NewHTTPServer(mcpgoIssueHandler(api, log, guard))
				defer hs.Close()
				if _, ok := cl.(nodeClient); ok {
					needNode(t)
					resentByNode(t, cl, hs, guarded)
					out, err := cl.run(testContext(t), target{transport: "http", url: hs.URL + "/"}, plan{Sessions: []session{{Steps: []step{list("list")}}}})
					if err != nil {
						t.Fatal(err)
					}
					listedAsDefined(t, out["list"], "list_issues")
				} else {
					resentByGoSDK(t, hs, guarded)
				}
				want := map[bool]int{false: 2, true: 1}[guarded]
				for _, w := range issueWrites {
					if n := api.creates(w.path); n != want {
						t.Errorf("%s: the API created %d, want %d", w.tool, n, want)
					}
					if n := log.saw(w.tool); n != 2 {
						t.Errorf("%s: the server's middleware saw %d calls, want 2", w.tool, n)
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

// listedAsDefined checks that the tool name is listed as the inventory
// defines it, member for member.
func listedAsDefined(t *testing.T, o outcome, name string) {
	t.Helper()
	for _, st := range mcpgoIssueTools() {
		if st.tool.Name != name {
			continue
		}
		b, err := json.Marshal(st.tool)
		if err != nil {
			t.Fatal(err)
		}
		var defined map[string]any
		if err := json.Unmarshal(b, &defined); err != nil {
			t.Fatal(err)
		}
		if listed := listedTool(t, o, name); !reflect.DeepEqual(listed, defined) {
			t.Errorf("%s listed as %v, defined as %v", name, listed, defined)
		}
		return
	}
	t.Fatalf("no tool %s in the inventory", name)
}
