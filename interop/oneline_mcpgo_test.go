package interop_test

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestOneLineProtectsMCPGoIssueServer is TestOneLineProtectsIssueServer on
// the mcp-go twin of issueserver_mcpgo_test.go, with the same clients,
// losses and settings (guardedIssueTools). What that server added for it:
// 1 option in newMCPGoIssueServer and the imports of idem, idem/mcpgo and
// a store (3 lines); no handler, tool definition or registration changed.
// Its own middleware runs before the guard, so it sees both calls of each
// write either way, and the TypeScript clients see list_issues listed
// exactly as the inventory defines it.
func TestOneLineProtectsMCPGoIssueServer(t *testing.T) {
	runOneLine(t, mcpgoIssueServer)
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
