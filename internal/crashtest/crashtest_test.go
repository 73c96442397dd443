package crashtest_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/crashtest"
	"github.com/idemkit/sdk/store/memory"
)

func TestParseKillPlan(t *testing.T) {
	for in, want := range map[string]crashtest.KillPlan{
		"":            {},
		"start:1":     {Point: crashtest.PointStart, Call: 1},
		"written:7":   {Point: crashtest.PointWritten, Call: 7},
		"committed:3": {Point: crashtest.PointCommitted, Call: 3},
	} {
		got, err := crashtest.ParseKillPlan(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseKillPlan(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"start", "start:0", "start:-1", "start:x", "secret:2", ":2", "written:2:3"} {
		_, err := crashtest.ParseKillPlan(bad)
		if err == nil {
			t.Errorf("ParseKillPlan(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseKillPlan(%q): the error repeats the value: %v", bad, err)
		}
	}
}

// The append tool numbers entries per log, answers a repeat from its op
// record, and refuses a log that is no document id without writing.
func TestAppendTool(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	crashtest.Register(srv, store, crashtest.Options{})
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(log, opID string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: crashtest.ToolName, Arguments: crashtest.Args{Log: log, Tag: opID, Note: "n", OpID: opID}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i, c := range []struct {
		log, op string
		seq     int64
	}{{"a", "op1", 1}, {"a", "op2", 2}, {"a", "op1", 1}, {"b", "op3", 1}} {
		res := call(c.log, c.op)
		if seq, err := seqOf(res); err != nil || seq != c.seq {
			t.Errorf("call %d (log %s, op %s): seq %d, %v; want %d", i, c.log, c.op, seq, err, c.seq)
		}
	}
	res := call("x/secret", "op4")
	if codeOf(res) != string(idem.CodeInvalidArguments) {
		t.Errorf("a log with a slash: code %q, want invalid_arguments", codeOf(res))
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), "secret") {
		t.Errorf("the refusal repeats the log: %s", b)
	}
	ok, err := read(ctx, store, crashtest.CounterKey("x"), nil)
	if err != nil || ok {
		t.Errorf("a refused call wrote a counter: %v, %v", ok, err)
	}
	var c crashtest.Counter
	if _, err := read(ctx, store, crashtest.CounterKey("a"), &c); err != nil || c.N != 2 {
		t.Errorf("log a holds %d entries (%v), want 2", c.N, err)
	}

	// A log at its limit is refused, and nothing is written.
	if err := store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, crashtest.LimitKey("a"), crashtest.Limit{Max: 2})
	}); err != nil {
		t.Fatal(err)
	}
	if res := call("a", "op5"); codeOf(res) != string(crashtest.CodeLogFull) {
		t.Errorf("a log at its limit: code %q, want %s", codeOf(res), crashtest.CodeLogFull)
	}
	if _, err := read(ctx, store, crashtest.CounterKey("a"), &c); err != nil || c.N != 2 {
		t.Errorf("after a refusal log a holds %d entries (%v), want 2", c.N, err)
	}
}

// Every Firestore run gets a project of its own, keeping the emulator
// address and the prefix; other stores' runs share the store.
func TestRunSpec(t *testing.T) {
	fs := "firestore://idemkit-examples?emulator=127.0.0.1%3A8282&prefix=x12_3"
	seen := map[string]bool{}
	for r := range 3 {
		got, err := runSpec(fs, r)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(got)
		if err != nil || u.Query().Get("emulator") != "127.0.0.1:8282" || u.Query().Get("prefix") != "x12_3" {
			t.Errorf("run %d: %q lost the emulator or the prefix (%v)", r, got, err)
		}
		if seen[u.Host] || u.Host == "idemkit-examples" {
			t.Errorf("run %d: project %q is not its own", r, u.Host)
		}
		seen[u.Host] = true
	}
	for _, spec := range []string{"sqlite:/tmp/x.db", "postgres://u@h/db?table_prefix=p_", "dynamodb://t?endpoint=http%3A%2F%2Fh"} {
		if got, err := runSpec(spec, 7); err != nil || got != spec {
			t.Errorf("runSpec(%q) = %q, %v; want it unchanged", spec, got, err)
		}
	}
	if _, err := runSpec("firestore://%zz", 0); err == nil {
		t.Errorf("a Firestore value that does not parse was accepted")
	}
}
