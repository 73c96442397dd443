package target

import (
	"cmp"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/internal/adapter"
)

// CodeAmbiguous: a close or delete named no record and the server would not
// guess. Pick one of the candidates (idem.Error.Candidates) and send its id.
const CodeAmbiguous idem.Code = "ambiguous_target"

// A Query describes a close or delete that may not name its record.
type Query struct {
	// ID is the record id the call named, or "".
	ID string
	// Owned are the running records this connection (device, session)
	// started.
	Owned []idem.Candidate
	// Others are the other running records the caller could mean.
	Others []idem.Candidate
	// Queued is true when the call carries anything that marks it as queued
	// or replayed, such as an event timestamp of its own.
	Queued bool
	// Request, when set, is the call: one that carries an op id (as the
	// op_id argument or in _meta, well formed or not) counts as queued.
	Request *mcp.CallToolRequest
}

// Resolve returns the id of the record a close or delete acts on. A named
// id is used as is. Without one, the record is resolved only when the
// connection owns exactly one running record and the call is not queued or
// replayed: a retry that arrives after its first attempt succeeded must
// never stop or delete another record. Otherwise Resolve refuses with an
// *idem.Error of code [CodeAmbiguous], listing every candidate and its id
// (sorted by id, each once) so the caller can pick.
func Resolve(q Query) (string, error) {
	if q.ID != "" {
		return q.ID, nil
	}
	owned := candidates(q.Owned)
	q.Queued = q.Queued || Queued(q.Request)
	if !q.Queued && len(owned) == 1 {
		return owned[0].ID, nil
	}
	all := candidates(append(slices.Clone(q.Owned), q.Others...))
	msg := "name the record to act on: send its id"
	switch {
	case len(all) == 0:
		msg = "there is no running record to act on; send the id of the record you mean"
	case q.Queued:
		msg = "a queued or replayed call must name its record: send one of these ids"
	case len(owned) > 1:
		msg = "more than one record is running: send the id of the one you mean"
	}
	return "", &idem.Error{Code: CodeAmbiguous, Message: msg, Candidates: all}
}

// Queued reports whether req carries an op id, as the op_id argument or in
// _meta, well formed or not: such a call is queued or replayed, and names
// its record.
func Queued(req *mcp.CallToolRequest) bool {
	if req == nil || req.Params == nil {
		return false
	}
	return adapter.HasOpID(&adapter.Call{Arguments: req.Params.Arguments, Meta: req.Params.Meta})
}

// candidates sorts cs by id, drops those without an id, and keeps the first
// of each id (Owned before Others, so an owned record keeps its label).
func candidates(cs []idem.Candidate) []idem.Candidate {
	out := slices.DeleteFunc(slices.Clone(cs), func(c idem.Candidate) bool { return c.ID == "" })
	slices.SortStableFunc(out, func(a, b idem.Candidate) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b idem.Candidate) bool { return a.ID == b.ID })
}
