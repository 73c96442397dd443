package target_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
)

func TestResolve(t *testing.T) {
	phone := idem.Candidate{ID: "s-phone", Label: "phone"}
	laptop := idem.Candidate{ID: "s-laptop", Label: "laptop"}
	cases := []struct {
		name  string
		q     target.Query
		want  string
		cands []string
	}{
		{"named id is used", target.Query{ID: "s-x", Owned: []idem.Candidate{phone}, Queued: true}, "s-x", nil},
		{"the only owned running record", target.Query{Owned: []idem.Candidate{phone}, Others: []idem.Candidate{laptop}}, "s-phone", nil},
		{"queued call never guesses", target.Query{Owned: []idem.Candidate{phone}, Queued: true}, "", []string{"s-phone"}},
		{"two owned", target.Query{Owned: []idem.Candidate{phone, laptop}}, "", []string{"s-laptop", "s-phone"}},
		{"owns none: another device's session is not guessed", target.Query{Others: []idem.Candidate{laptop}}, "", []string{"s-laptop"}},
		{"nothing running", target.Query{}, "", []string{}},
	}
	for _, c := range cases {
		got, err := target.Resolve(c.q)
		if c.cands == nil {
			if err != nil || got != c.want {
				t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
			}
			continue
		}
		var e *idem.Error
		if !errors.As(err, &e) || e.Code != target.CodeAmbiguous {
			t.Errorf("%s: %q, %v; want ambiguous_target", c.name, got, err)
			continue
		}
		if ids := candidateIDs(e); !slices.Equal(ids, c.cands) {
			t.Errorf("%s: candidates %v, want %v", c.name, ids, c.cands)
		}
	}
}

// A call that carries an op id, as the op_id argument or in _meta, counts
// as queued: it is never resolved to the one running record.
func TestResolveRequestWithOpID(t *testing.T) {
	phone := idem.Candidate{ID: "s-phone", Label: "phone"}
	req := func(args string, meta mcp.Meta) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "end", Arguments: json.RawMessage(args), Meta: meta}}
	}
	if got, err := target.Resolve(target.Query{Owned: []idem.Candidate{phone}, Request: req(`{}`, nil)}); err != nil || got != "s-phone" {
		t.Errorf("a live call: %q, %v; want s-phone", got, err)
	}
	for _, r := range []*mcp.CallToolRequest{req(`{"op_id":"q-1"}`, nil), req(`{}`, mcp.Meta{idem.MetaOpID: "q-1"}), req(`{"op_id":""}`, nil)} {
		got, err := target.Resolve(target.Query{Owned: []idem.Candidate{phone}, Request: r})
		var e *idem.Error
		if !errors.As(err, &e) || e.Code != target.CodeAmbiguous || !slices.Equal(candidateIDs(e), []string{"s-phone"}) {
			t.Errorf("a call with an op id (%s): %q, %v; want ambiguous_target listing s-phone", r.Params.Arguments, got, err)
		}
	}
}

// Empty ids are no candidates, and a record listed twice is one.
func TestResolveIgnoresEmptyAndDuplicateIDs(t *testing.T) {
	phone := idem.Candidate{ID: "s-phone", Label: "phone"}
	if got, err := target.Resolve(target.Query{Owned: []idem.Candidate{phone, phone}}); err != nil || got != "s-phone" {
		t.Errorf("one record listed twice: %q, %v", got, err)
	}
	_, err := target.Resolve(target.Query{Owned: []idem.Candidate{{ID: ""}}})
	var e *idem.Error
	if !errors.As(err, &e) || e.Code != target.CodeAmbiguous || len(e.Candidates) != 0 {
		t.Errorf("an owned record without an id: %v", err)
	}
	_, err = target.Resolve(target.Query{Owned: []idem.Candidate{phone}, Others: []idem.Candidate{{ID: "s-phone", Label: "other"}}, Queued: true})
	if !errors.As(err, &e) || len(e.Candidates) != 1 || e.Candidates[0].Label != "phone" {
		t.Errorf("duplicate across Owned and Others: %+v", e)
	}
}

func candidateIDs(e *idem.Error) []string {
	ids := []string{}
	for _, c := range e.Candidates {
		ids = append(ids, c.ID)
	}
	return ids
}
