package main

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
)

// TestUsersOverHTTP: alice and bob, with their own bearer tokens, use the
// same session id and the same op ids over streamable HTTP. Neither sees,
// replays, stops or deletes the other's records.
func TestUsersOverHTTP(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		hs := httptest.NewServer(exserve.Handler(h.srv, exserve.Users{"tok-alice": "alice", "tok-bob": "bob"}))
		defer hs.Close()
		as := func(token string) *mcp.ClientSession {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(h.ctx,
				&mcp.StreamableClientTransport{Endpoint: hs.URL + exserve.Path, HTTPClient: extest.BearerClient(token)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		alice, bob := as("tok-alice"), as("tok-bob")

		h.ok(alice, "start_focus", withOp(start("phone", "s1", at("13:30")), "op-1"))
		var a1 StepsAdded
		structured(t, h.ok(alice, "add_steps", map[string]any{"date": "2026-03-02", "steps": 100, "op_id": "op-2"}), &a1)

		// bob: the same session id and op ids are his own.
		res := h.ok(bob, "start_focus", withOp(start("laptop", "s1", at("14:00")), "op-1"))
		var started Started
		structured(t, res, &started)
		if res.Meta[idem.MetaReplayed] == true || started.Device != "laptop" {
			t.Errorf("bob's start answered alice's: %+v, replayed %v", started, res.Meta[idem.MetaReplayed])
		}
		var b1 StepsAdded
		res = h.ok(bob, "add_steps", map[string]any{"date": "2026-03-02", "steps": 200, "op_id": "op-2"})
		structured(t, res, &b1)
		if res.Meta[idem.MetaReplayed] == true || b1.DaySteps != 200 {
			t.Errorf("bob's add_steps: %+v, replayed %v; want his own 200", b1, res.Meta[idem.MetaReplayed])
		}
		var now Now
		structured(t, h.ok(bob, "get_now", map[string]any{}), &now)
		if len(now.Running) != 1 || now.Running[0].Device != "laptop" {
			t.Errorf("bob sees %+v, want only his laptop session", now.Running)
		}
		// bob's stop without an id from a device of his that runs nothing
		// (alice's phone runs s1) is refused with his candidates only.
		res = h.call(bob, "end_focus", map[string]any{"device": "phone"})
		if got := candidateIDs(t, res); codeOf(res) != string(target.CodeAmbiguous) || !slices.Equal(got, []string{"s1"}) {
			t.Errorf("bob's stop without an id: code %q candidates %v", codeOf(res), got)
		}
		st := h.ok(bob, "get_operation", map[string]any{"tool": "add_steps", "op_id": "op-2"})
		var op struct {
			Status string     `json:"status"`
			Output StepsAdded `json:"output"`
		}
		structured(t, st, &op)
		if op.Status != "committed" || op.Output.DaySteps != 200 {
			t.Errorf("bob's get_operation: %+v, want his own result", op)
		}
		h.ok(bob, "end_focus", map[string]any{"session_id": "s1", "device": "laptop", "end_at": at("14:30")})
		h.ok(bob, "delete_session", map[string]any{"session_id": "s1"})

		// alice's records are as she left them.
		a := h.session("alice", "s1")
		if !a.Running() || a.Device != "phone" || len(a.Stops) != 0 {
			t.Errorf("alice's s1 after bob's calls: %+v", a)
		}
		var day Day
		structured(t, h.ok(alice, "list_sessions", map[string]any{"date": "2026-03-02"}), &day)
		if day.Steps != 100 || len(day.Sessions) != 1 || day.Sessions[0].Device != "phone" {
			t.Errorf("alice's day: %+v", day)
		}
		var again StepsAdded
		res = h.ok(alice, "add_steps", map[string]any{"date": "2026-03-02", "steps": 100, "op_id": "op-2"})
		structured(t, res, &again)
		if res.Meta[idem.MetaReplayed] != true || again != a1 {
			t.Errorf("alice's replay: %+v replayed %v, want %+v", again, res.Meta[idem.MetaReplayed], a1)
		}
	})
}
