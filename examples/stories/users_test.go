package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
)

// TestTwoUsersOverHTTP serves the tools over streamable HTTP with two bearer
// tokens. Alice and Bob publish the same slug with the same op id, report
// reproductions and edit: each sees only their own story, neither call
// replays the other's, and Bob cannot edit a story only Alice has.
func TestTwoUsersOverHTTP(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		hs := httptest.NewServer(exserve.Handler(e.srv, exserve.Users{"tok-alice": "alice", "tok-bob": "bob"}))
		t.Cleanup(hs.Close)
		connect := func(token string) *mcp.ClientSession {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(e.ctx,
				&mcp.StreamableClientTransport{Endpoint: hs.URL + exserve.Path, HTTPClient: extest.BearerClient(token)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		alice, bob := connect("tok-alice"), connect("tok-bob")

		ok(t, e.ctx, alice, "publish_story", map[string]any{"slug": "shared", "title": "Alice's", "body": "a", "op_id": "op-1"})
		res := ok(t, e.ctx, bob, "publish_story", map[string]any{"slug": "shared", "title": "Bob's", "body": "b", "op_id": "op-1"})
		var pub Published
		if err := remarshal(res.StructuredContent, &pub); err != nil || res.Meta[idem.MetaReplayed] == true || pub.Title != "Bob's" {
			t.Fatalf("Bob's publish with Alice's op id answered %s (replayed %v), want his own story", text(res), res.Meta[idem.MetaReplayed])
		}
		ok(t, e.ctx, alice, "publish_story", map[string]any{"slug": "alice-only", "title": "Mine", "body": "m"})
		ok(t, e.ctx, alice, "report_reproduction", map[string]any{"slug": "shared", "handle": "@x"})
		ok(t, e.ctx, bob, "report_reproduction", map[string]any{"slug": "shared", "handle": "@y"})
		ok(t, e.ctx, bob, "report_check", map[string]any{"slug": "shared", "handle": "@y", "result": "fail"})
		ok(t, e.ctx, bob, "edit_story", map[string]any{"slug": "shared", "revision": 1, "body": "b2"})
		if r := call(t, e.ctx, bob, "edit_story", map[string]any{"slug": "alice-only", "revision": 1, "body": "taken"}); !r.IsError || r.Meta[idem.MetaError] != string(idem.CodeNotSaved) {
			t.Errorf("Bob edited Alice's story: %s", text(r))
		}
		if r := call(t, e.ctx, bob, "get_story", map[string]any{"slug": "alice-only"}); !r.IsError {
			t.Errorf("Bob read Alice's story: %s", text(r))
		}

		a, b := e.view(t, alice, "shared"), e.view(t, bob, "shared")
		if a.Title != "Alice's" || a.Body != "a" || a.Revision != 1 || a.Reproductions != 1 || a.Reproducers[0].Handle != "@x" || len(a.Checks) != 0 || len(a.Posts) != 2 {
			t.Errorf("Alice's story %+v: want her title, body a, revision 1, @x only, no checks, 2 posts", a)
		}
		if b.Title != "Bob's" || b.Body != "b2" || b.Revision != 2 || b.Reproductions != 1 || b.Reproducers[0].Handle != "@y" || len(b.Checks) != 1 || len(b.Posts) != 3 {
			t.Errorf("Bob's story %+v: want his title, body b2, revision 2, @y only, one check, 3 posts", b)
		}
		for who, cs := range map[string]*mcp.ClientSession{"Alice's": alice, "Bob's": bob} {
			st := ok(t, e.ctx, cs, "get_operation", map[string]any{"tool": "publish_story", "op_id": "op-1"})
			var op struct {
				Status string    `json:"status"`
				Output Published `json:"output"`
			}
			if err := remarshal(st.StructuredContent, &op); err != nil || op.Status != "committed" || op.Output.Title != who {
				t.Errorf("get_operation for %s op-1: %s", who, text(st))
			}
		}
		stats := e.social.Stats()
		if stats.Count("announcement") != 3 || stats.Count("reproduction") != 2 || stats.Count("revision") != 1 || stats.Repeats != 0 {
			t.Errorf("social: %d announcements, %d reproduction notices, %d revision notices, %d repeats; want 3, 2, 1, 0",
				stats.Count("announcement"), stats.Count("reproduction"), stats.Count("revision"), stats.Repeats)
		}
	})
}

// TestToolAnnotations lists the tools as a client would: every write tool
// says idempotentHint (each is keyed), get_story and get_operation are
// read-only, and the descriptions name the record keys.
func TestToolAnnotations(t *testing.T) {
	e := newEnv(t, "memory")
	tools, err := e.connect(t).ListTools(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]bool{ // idempotent, read-only
		"publish_story":       {true, false},
		"report_reproduction": {true, false},
		"edit_story":          {true, false},
		"report_check":        {true, false},
		"get_story":           {true, true},
		"get_operation":       {true, true},
	}
	for _, tool := range tools.Tools {
		w, found := want[tool.Name]
		if !found {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		delete(want, tool.Name)
		if tool.Annotations == nil || tool.Annotations.IdempotentHint != w[0] || tool.Annotations.ReadOnlyHint != w[1] {
			t.Errorf("%s annotations %+v, want idempotent=%v readOnly=%v", tool.Name, tool.Annotations, w[0], w[1])
		}
		if tool.Name != "get_operation" && !strings.Contains(tool.Description, "slug") {
			t.Errorf("%s: the description does not name its key: %q", tool.Name, tool.Description)
		}
	}
	if len(want) != 0 {
		t.Errorf("missing tools %v", want)
	}
}

// TestBadInput sends calls that must be refused: each gets a code, never
// repeats the value, and nothing is stored or posted.
func TestBadInput(t *testing.T) {
	e := newEnv(t, "sqlite")
	cs := e.connect(t)
	const secret = "SENTINEL-7f3a"
	long := strings.Repeat("x", maxNote+1)
	for _, c := range []write{
		{"publish_story", map[string]any{"slug": "Bad " + secret, "title": "t", "body": "b"}},
		{"publish_story", map[string]any{"slug": "fine", "title": "", "body": "b"}},
		{"publish_story", map[string]any{"slug": "", "title": "t", "body": "b"}},
		{"report_reproduction", map[string]any{"slug": "fine", "handle": "@a"}},
		{"report_reproduction", map[string]any{"slug": "fine", "handle": secret + "/x"}},
		{"edit_story", map[string]any{"slug": "fine", "revision": 1, "body": secret}},
		{"edit_story", map[string]any{"slug": "fine", "revision": secret, "body": "b"}},
		{"report_check", map[string]any{"slug": "fine", "handle": "@a", "result": secret}},
		{"get_story", map[string]any{"slug": "fine"}},
	} {
		res := call(t, e.ctx, cs, c.tool, c.args)
		if !res.IsError || res.Meta[idem.MetaError] == nil {
			t.Errorf("%s %v: not refused with a code: %s", c.tool, c.args, text(res))
		}
		if strings.Contains(text(res), secret) {
			t.Errorf("%s: the refusal repeats the value: %s", c.tool, text(res))
		}
	}
	ok(t, e.ctx, cs, "publish_story", map[string]any{"slug": "fine", "title": "t", "body": "b"})
	res := call(t, e.ctx, cs, "report_reproduction", map[string]any{"slug": "fine", "handle": "@a", "note": long})
	if !res.IsError {
		t.Errorf("a note over %d bytes was accepted", maxNote)
	}
	v := e.view(t, cs, "fine")
	if st := e.social.Stats(); v.Reproductions != 0 || st.Requests != 1 {
		t.Errorf("after refusals: %d reproductions, %d requests to the social service; want 0 and 1 (the announcement)", v.Reproductions, st.Requests)
	}
}
