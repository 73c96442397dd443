package interop_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// inspectorDir is where the MCP Inspector's CLI (@modelcontextprotocol/inspector-cli)
// runs from: it reads its own package.json as ../package.json of the
// working directory.
var inspectorDir = filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")

// inspectorCall makes one tools/call with the Inspector's CLI (one process,
// one connection) and returns its result. args are --tool-arg pairs and
// meta --tool-metadata pairs, each "key=value".
func inspectorCall(t *testing.T, tg target, tool string, args, meta []string) callResult {
	t.Helper()
	cmdArgs := []string{"index.js"}
	if tg.transport == "http" {
		cmdArgs = append(cmdArgs, tg.url, "--transport", "http")
	} else {
		// The server's path is the target; its flags go after --.
		cmdArgs = append(cmdArgs, tg.command[0], "--transport", "stdio")
	}
	cmdArgs = append(cmdArgs, "--method", "tools/call", "--tool-name", tool)
	for _, a := range args {
		cmdArgs = append(cmdArgs, "--tool-arg", a)
	}
	for _, m := range meta {
		cmdArgs = append(cmdArgs, "--tool-metadata", m)
	}
	if tg.transport == "stdio" {
		cmdArgs = append(append(cmdArgs, "--"), tg.command[1:]...)
	}
	cmd := exec.CommandContext(testContext(t), "node", cmdArgs...)
	cmd.Dir = inspectorDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector-cli %v: %v\n%s%s", cmdArgs, err, out, stderr.Bytes())
	}
	return resultOf(t, tool, outcome{Result: json.RawMessage(out)})
}

// TestInspectorCLIOpIDBothWays sends op ids with the Inspector's CLI as the
// op_id argument (--tool-arg) and in _meta (--tool-metadata), on a tool that
// requires one and on get_operation: each placement names the same op.
func TestInspectorCLIOpIDBothWays(t *testing.T) {
	needNode(t)
	for _, qs := range quickstartServers() {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(qs.name+"/"+transport, func(t *testing.T) {
				t.Parallel()
				inspectorOpIDBothWays(t, newTarget(t, transport, qs.bin, "-db", t.TempDir()+"/q.db"))
			})
		}
	}
}

// inspectorOpIDBothWays is TestInspectorCLIOpIDBothWays on one target.
func inspectorOpIDBothWays(t *testing.T, tg target) {
	expense := []string{"amount_cents=300", "note=inspector"}
	const inMeta = "io.idemkit/op_id="

	// An op sent first in _meta, then as the argument; another
	// the other way round.
	for _, c := range []struct{ first, again [2][]string }{
		{[2][]string{expense, {inMeta + "op-insp-meta"}}, [2][]string{append(expense, "op_id=op-insp-meta"), nil}},
		{[2][]string{append(expense, "op_id=op-insp-arg"), nil}, [2][]string{expense, {inMeta + "op-insp-arg"}}},
	} {
		first := inspectorCall(t, tg, "add_expense", c.first[0], c.first[1])
		if first.IsError || first.replayed() {
			t.Fatalf("first call %v %v: %s", c.first[0], c.first[1], first.raw)
		}
		again := inspectorCall(t, tg, "add_expense", c.again[0], c.again[1])
		if again.IsError || !again.replayed() || again.structured() != first.structured() {
			t.Errorf("the same op id in the other place: %s, want a replay of %s", again.raw, first.structured())
		}
	}
	for _, c := range []struct {
		args, meta []string
		status     string
	}{
		{[]string{"tool=add_expense"}, []string{inMeta + "op-insp-meta"}, "committed"},
		{[]string{"tool=add_expense", "op_id=op-insp-meta"}, nil, "committed"},
		{[]string{"tool=add_expense"}, []string{inMeta + "op-never-sent"}, "not_committed"},
	} {
		r := inspectorCall(t, tg, "get_operation", c.args, c.meta)
		if st, _ := r.StructuredContent.(map[string]any); r.IsError || st["status"] != c.status {
			t.Errorf("get_operation %v %v: %s, want %s", c.args, c.meta, r.raw, c.status)
		}
	}
	if r := inspectorCall(t, tg, "get_operation", []string{"tool=add_expense"}, nil); !r.IsError || r.code() != "invalid_op_id" {
		t.Errorf("get_operation without an op id: %s, want invalid_op_id", r.raw)
	}
}
