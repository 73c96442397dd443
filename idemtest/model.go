package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// A Retry is one way a model calls a tool again after the answer to its
// call was lost, and what that did.
type Retry struct {
	// Kind says what the model regenerated: "same arguments", "fresh op
	// id", "re-minted ids", "re-read times" or "all regenerated".
	Kind string
	// Params is the call sent again.
	Params *mcp.CallToolParams
	// Answer is the answer to it.
	Answer *mcp.CallToolResult
	// Before is the state once the lost call committed, After the state
	// once the retry was answered, as JSON.
	Before, After json.RawMessage
}

// Moved reports whether the retry changed the state: the model's retry had
// an effect of its own.
func (r *Retry) Moved() bool { return !bytes.Equal(r.Before, r.After) }

// ModelRetries plays a model whose call's answer was lost after the server
// committed (a connection reset, so that the model is told only the
// transport error) and that calls the tool again, as models were seen to:
// with the same arguments, and with the values it minted made anew. Each
// retry runs on a fresh Subject: call is sent over a connection that loses
// its answer, then the retry over a new connection. It returns every retry
// and, as an error, the ones that moved the state, which the first call's
// repeat must not do.
//
// What a model regenerates, among the top-level arguments:
//   - the op id (the op_id argument, _meta["io.idemkit/op_id"]): a new one;
//   - a string argument whose value is a UUID: a new UUID;
//   - a string argument whose value is an RFC 3339 time: a minute later, a
//     clock read again.
//
// had names the arguments the model had before the call and keeps on a
// retry (a session id it read from get_now, say): they are never
// regenerated. A retry that is refused (isError) and moves nothing is
// what a tool should do with a retry it cannot tell from a new call.
// Leave out of State what differs by design (server-made ids, clocks).
func ModelRetries(ctx context.Context, fresh func(ctx context.Context) (*Subject, error), call *mcp.CallToolParams, had ...string) ([]Retry, error) {
	if fresh == nil || call == nil {
		return nil, errors.New("idemtest: ModelRetries needs a fresh function and a call")
	}
	args, err := argumentsOf(call)
	if err != nil {
		return nil, err
	}
	var moved []string
	var out []Retry
	for _, v := range retryVariants(call, args, had) {
		r, err := lostThenRetried(ctx, fresh, call, v)
		if err != nil {
			return out, err
		}
		out = append(out, *r)
		if r.Moved() {
			moved = append(moved, fmt.Sprintf("%s: %s\n   before %s\n    after %s", r.Kind, jsonText(r.Params.Arguments), r.Before, r.After))
		}
	}
	if len(moved) > 0 {
		return out, fmt.Errorf("idemtest: %d of %d retries of %s after a lost answer moved the state:\n%s",
			len(moved), len(out), call.Name, strings.Join(moved, "\n"))
	}
	return out, nil
}

// A retryVariant is a call a model sends again, and what it regenerated.
type retryVariant struct {
	kind   string
	params *mcp.CallToolParams
}

var (
	uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// reReadAfter is how much later a model reads the clock again.
	reReadAfter = time.Minute
)

// retryVariants returns the calls a model may send again: the same one,
// then one per kind of value it regenerates that call holds, then all of
// them regenerated at once when there are two kinds or more.
func retryVariants(call *mcp.CallToolParams, args map[string]any, had []string) []retryVariant {
	same := retryVariant{kind: "same arguments", params: clone(call)}
	all := clone(call)
	allArgs := maps.Clone(args)
	var kinds []retryVariant
	regen := func(kind string, change func(args map[string]any, meta mcp.Meta) bool) {
		p := clone(call)
		a := maps.Clone(args)
		if p.Meta == nil {
			p.Meta = mcp.Meta{}
		}
		if !change(a, p.Meta) {
			return
		}
		if len(p.Meta) == 0 {
			p.Meta = nil
		}
		p.Arguments = a
		kinds = append(kinds, retryVariant{kind: kind, params: p})
		if all.Meta == nil {
			all.Meta = mcp.Meta{}
		}
		change(allArgs, all.Meta)
	}
	regen("fresh op id", func(a map[string]any, meta mcp.Meta) bool {
		changed := false
		if _, ok := a["op_id"]; ok && !slices.Contains(had, "op_id") {
			a["op_id"], changed = "retry-"+newUUID(), true
		}
		if _, ok := meta[idem.MetaOpID]; ok {
			meta[idem.MetaOpID], changed = "retry-"+newUUID(), true
		}
		return changed
	})
	regen("re-minted ids", func(a map[string]any, _ mcp.Meta) bool {
		return each(a, had, func(s string) (string, bool) { return newUUID(), uuidPattern.MatchString(s) })
	})
	regen("re-read times", func(a map[string]any, _ mcp.Meta) bool {
		return each(a, had, func(s string) (string, bool) {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return "", false
			}
			layout := time.RFC3339
			if strings.Contains(s, ".") {
				layout = time.RFC3339Nano
			}
			return at.Add(reReadAfter).Format(layout), true
		})
	})
	out := append([]retryVariant{same}, kinds...)
	if len(kinds) > 1 {
		if len(all.Meta) == 0 {
			all.Meta = nil
		}
		all.Arguments = allArgs
		out = append(out, retryVariant{kind: "all regenerated", params: all})
	}
	return out
}

// each replaces, in args, the string values other than op_id and those
// named in had for which f says so, and reports whether it replaced any.
func each(args map[string]any, had []string, f func(string) (string, bool)) bool {
	changed := false
	for name, v := range args {
		s, ok := v.(string)
		if !ok || name == "op_id" || slices.Contains(had, name) {
			continue
		}
		if nv, ok := f(s); ok {
			args[name], changed = nv, true
		}
	}
	return changed
}

// lostThenRetried sends call to a fresh Subject over a connection that
// loses its answer after the handler ran, reads the state, sends v's call
// over a new connection, and reads the state again.
func lostThenRetried(ctx context.Context, fresh func(context.Context) (*Subject, error), call *mcp.CallToolParams, v retryVariant) (*Retry, error) {
	subj, err := fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemtest: fresh: %w", err)
	}
	if err := subj.check(); err != nil {
		return nil, err
	}
	tg, release := subj.open()
	defer release()
	if err := tg.loseAnswer(ctx, clone(call)); err != nil {
		return nil, fmt.Errorf("%s: %w", v.kind, err)
	}
	r := &Retry{Kind: v.kind, Params: v.params}
	if r.Before, err = subj.snapshot(ctx); err != nil {
		return nil, err
	}
	cs, err := tg.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemtest: connect: %w", err)
	}
	defer cs.Close()
	if r.Answer, err = cs.CallTool(ctx, clone(v.params)); err != nil {
		return nil, fmt.Errorf("idemtest: %s: retry: %w", v.kind, err)
	}
	if r.After, err = subj.snapshot(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// argumentsOf returns call's arguments as a map, which ModelRetries
// regenerates values in.
func argumentsOf(call *mcp.CallToolParams) (map[string]any, error) {
	b, err := json.Marshal(call.Arguments)
	if err != nil {
		return nil, fmt.Errorf("idemtest: arguments: %w", err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers go back as they came
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("idemtest: ModelRetries needs arguments that are a JSON object")
	}
	return m, nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
