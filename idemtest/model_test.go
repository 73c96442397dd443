package idemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// A tool whose only protection is a required op id: the lost call
// committed, and a model's retry under a new op id adds the expense again.
func TestModelRetriesReportsAnOpIDOnlyAdd(t *testing.T) {
	retries, err := idemtest.ModelRetries(context.Background(), newLedger, addExpense(500, "op-1"))
	if err == nil {
		t.Fatal("no error for a tool whose total doubles on a retry under a new op id")
	}
	if !strings.Contains(err.Error(), "fresh op id") || strings.Contains(err.Error(), "same arguments:") {
		t.Errorf("error names the wrong retries: %v", err)
	}
	got := map[string]string{}
	for _, r := range retries {
		got[r.Kind] = fmt.Sprintf("%s -> %s moved=%v", r.Before, r.After, r.Moved())
	}
	want := map[string]string{
		"same arguments": `{"cents":500} -> {"cents":500} moved=false`,
		"fresh op id":    `{"cents":500} -> {"cents":1000} moved=true`,
	}
	if len(got) != len(want) || got["same arguments"] != want["same arguments"] || got["fresh op id"] != want["fresh op id"] {
		t.Errorf("retries %v, want %v", got, want)
	}
	for _, r := range retries {
		if r.Kind == "fresh op id" && r.Params.Arguments.(map[string]any)["op_id"] == "op-1" {
			t.Error("the fresh op id retry resent the first op id")
		}
	}
}

type budget struct {
	Month string `json:"month"`
	Cents int    `json:"cents"`
	// SessionID names the chat that set it: a model-minted UUID.
	SessionID string `json:"session_id,omitempty"`
}

// newBudgets is a Subject whose set_budget replaces the budget its keys
// name (a month; a month and a session), with an optional op id; its state
// is every budget record.
func newBudgets(keys ...string) func(ctx context.Context) (*idemtest.Subject, error) {
	return func(ctx context.Context) (*idemtest.Subject, error) {
		s := memory.New(nil)
		index := idem.Key{Collection: "budgets", ID: "index"}
		srv := mcp.NewServer(&mcp.Implementation{Name: "budgets", Version: "v0"}, nil)
		idem.AddTool(srv, &mcp.Tool{Name: "set_budget"}, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in budget) (*mcp.CallToolResult, budget, error) {
			id := in.Month
			if len(keys) > 1 {
				id += ":" + in.SessionID
			}
			all := map[string]budget{}
			if _, err := tx.Get(ctx, index, &all); err != nil && !errors.Is(err, idem.ErrNotFound) {
				return nil, in, err
			}
			all[id] = in
			return nil, in, tx.Put(ctx, index, all)
		}, idem.RecordKeys(keys...), idem.OpID())
		return &idemtest.Subject{Server: srv, State: func(ctx context.Context) (any, error) {
			all := map[string]budget{}
			err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				_, err := tx.Get(ctx, index, &all)
				return err
			})
			return all, err
		}}, nil
	}
}

const sessionA = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"

// A keyed replace: whatever op id the model sends again, the month's
// record is written again, and nothing moves.
func TestModelRetriesPassesAKeyedReplace(t *testing.T) {
	call := &mcp.CallToolParams{Name: "set_budget", Arguments: map[string]any{"month": "2026-11", "cents": 40000, "op_id": "op-1"}}
	retries, err := idemtest.ModelRetries(context.Background(), newBudgets("month"), call)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range retries {
		kinds = append(kinds, r.Kind)
		if r.Answer.IsError || r.Moved() {
			t.Errorf("%s: %s, moved %v", r.Kind, mustJSON(r.Answer), r.Moved())
		}
	}
	if strings.Join(kinds, ",") != "same arguments,fresh op id" {
		t.Errorf("retries %v", kinds)
	}
}

// A key the model minted (a UUID) is minted again on a retry and names a
// second record; one it had before the call (had) is kept, and nothing
// moves.
func TestModelRetriesRemintsUUIDsUnlessHad(t *testing.T) {
	call := &mcp.CallToolParams{Name: "set_budget", Arguments: map[string]any{"month": "2026-11", "cents": 40000, "session_id": sessionA}}
	fresh := newBudgets("month", "session_id")
	retries, err := idemtest.ModelRetries(context.Background(), fresh, call)
	if err == nil || !strings.Contains(err.Error(), "re-minted ids") {
		t.Fatalf("a re-minted key went unreported: %v", err)
	}
	for _, r := range retries {
		if r.Kind == "re-minted ids" && r.Params.Arguments.(map[string]any)["session_id"] == sessionA {
			t.Error("the UUID was not minted again")
		}
	}
	if _, err := idemtest.ModelRetries(context.Background(), fresh, call, "session_id"); err != nil {
		t.Errorf("with session_id had: %v", err)
	}
}

type beat struct {
	SessionID string `json:"session_id"`
	At        string `json:"at"`
}

// A heartbeat keyed by its time: a model that reads the clock again for its
// retry records a second heartbeat, and ModelRetries says so.
func TestModelRetriesRereadsTimes(t *testing.T) {
	fresh := func(ctx context.Context) (*idemtest.Subject, error) {
		s := memory.New(nil)
		n := 0
		srv := mcp.NewServer(&mcp.Implementation{Name: "beats", Version: "v0"}, nil)
		idem.AddTool(srv, &mcp.Tool{Name: "heartbeat"}, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in beat) (*mcp.CallToolResult, any, error) {
			err := tx.Create(ctx, idem.Key{Collection: "beats", ID: in.SessionID + "@" + in.At}, in)
			if errors.Is(err, idem.ErrExists) {
				return nil, nil, nil
			}
			n++
			return nil, nil, err
		}, idem.RecordKeys("session_id", "at"))
		return &idemtest.Subject{Server: srv, State: func(ctx context.Context) (any, error) { return n, nil }}, nil
	}
	call := &mcp.CallToolParams{Name: "heartbeat", Arguments: map[string]any{"session_id": "s1", "at": "2026-12-01T10:00:00Z"}}
	retries, err := idemtest.ModelRetries(context.Background(), fresh, call)
	if err == nil || !strings.Contains(err.Error(), "re-read times") {
		t.Fatalf("a re-read time went unreported: %v", err)
	}
	for _, r := range retries {
		if r.Kind == "re-read times" && r.Params.Arguments.(map[string]any)["at"] != "2026-12-01T10:01:00Z" {
			t.Errorf("re-read time %v", r.Params.Arguments)
		}
	}
}

func TestModelRetriesRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := idemtest.ModelRetries(ctx, nil, addExpense(1, "a")); err == nil {
		t.Error("no fresh function accepted")
	}
	if _, err := idemtest.ModelRetries(ctx, newLedger, &mcp.CallToolParams{Name: "add_expense", Arguments: []int{1}}); err == nil {
		t.Error("arguments that are not an object accepted")
	}
	// A call refused before the handler runs still loses its answer; a
	// tool the server does not have has no answer to lose.
	if _, err := idemtest.ModelRetries(ctx, newLedger, &mcp.CallToolParams{Name: "nosuch", Arguments: map[string]any{}}); err == nil {
		t.Error("a call whose answer was not lost accepted")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
