package idem_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

func TestResolveTarget(t *testing.T) {
	phone := idem.Candidate{ID: "s-phone", Label: "phone"}
	laptop := idem.Candidate{ID: "s-laptop", Label: "laptop"}
	cases := []struct {
		name  string
		q     idem.TargetQuery
		want  string
		cands []string
	}{
		{"named id is used", idem.TargetQuery{ID: "s-x", Owned: []idem.Candidate{phone}, Queued: true}, "s-x", nil},
		{"the only owned running record", idem.TargetQuery{Owned: []idem.Candidate{phone}, Others: []idem.Candidate{laptop}}, "s-phone", nil},
		{"queued call never guesses", idem.TargetQuery{Owned: []idem.Candidate{phone}, Queued: true}, "", []string{"s-phone"}},
		{"two owned", idem.TargetQuery{Owned: []idem.Candidate{phone, laptop}}, "", []string{"s-laptop", "s-phone"}},
		{"owns none: another device's session is not guessed", idem.TargetQuery{Others: []idem.Candidate{laptop}}, "", []string{"s-laptop"}},
		{"nothing running", idem.TargetQuery{}, "", []string{}},
	}
	for _, c := range cases {
		got, err := idem.ResolveTarget(c.q)
		if c.cands == nil {
			if err != nil || got != c.want {
				t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
			}
			continue
		}
		var e *idem.Error
		if !errors.As(err, &e) || e.Code != idem.CodeAmbiguousTarget {
			t.Errorf("%s: %q, %v; want ambiguous_target", c.name, got, err)
			continue
		}
		ids := []string{}
		for _, cand := range e.Candidates {
			ids = append(ids, cand.ID)
		}
		if a, b := mustJSON(ids), mustJSON(c.cands); a != b {
			t.Errorf("%s: candidates %s, want %s", c.name, a, b)
		}
	}
}

func TestHasOpID(t *testing.T) {
	req := func(args string, meta mcp.Meta) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x", Arguments: json.RawMessage(args), Meta: meta}}
	}
	if idem.HasOpID(req(`{"a":1}`, nil)) || idem.HasOpID(nil) {
		t.Error("no op id reported as present")
	}
	if !idem.HasOpID(req(`{"op_id":"k"}`, nil)) || !idem.HasOpID(req(`{}`, mcp.Meta{idem.MetaOpID: "k"})) {
		t.Error("op id not seen")
	}
	if !idem.HasOpID(req(`{"op_id":""}`, nil)) {
		t.Error("a malformed op id still marks the call as replayed")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Empty ids are no candidates, and a record listed twice is one.
func TestResolveTargetIgnoresEmptyAndDuplicateIDs(t *testing.T) {
	phone := idem.Candidate{ID: "s-phone", Label: "phone"}
	if got, err := idem.ResolveTarget(idem.TargetQuery{Owned: []idem.Candidate{phone, phone}}); err != nil || got != "s-phone" {
		t.Errorf("one record listed twice: %q, %v", got, err)
	}
	_, err := idem.ResolveTarget(idem.TargetQuery{Owned: []idem.Candidate{{ID: ""}}})
	var e *idem.Error
	if !errors.As(err, &e) || e.Code != idem.CodeAmbiguousTarget || len(e.Candidates) != 0 {
		t.Errorf("an owned record without an id: %v", err)
	}
	_, err = idem.ResolveTarget(idem.TargetQuery{Owned: []idem.Candidate{phone}, Others: []idem.Candidate{{ID: "s-phone", Label: "other"}}, Queued: true})
	if !errors.As(err, &e) || len(e.Candidates) != 1 || e.Candidates[0].Label != "phone" {
		t.Errorf("duplicate across Owned and Others: %+v", e)
	}
}
