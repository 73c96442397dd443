package idemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// A Subject is the server under test on fresh state, and a way to read
// that state. AllOrders, Concurrently and ModelRetries get a new one for
// every run, from a function the test supplies:
//
//	fresh := func(ctx context.Context) (*idemtest.Subject, error) {
//		s := memory.New(nil) // state no other Subject shares
//		return &idemtest.Subject{Server: newServer(s), State: func(ctx context.Context) (any, error) {
//			return readLedger(ctx, s)
//		}}, nil
//	}
//
// The server is an *mcp.Server in process, or any streamable HTTP handler
// (set Handler instead of Server), which is served on loopback by an
// [HTTPServer] for the run:
//
//	return &idemtest.Subject{Handler: server.NewStreamableHTTPServer(newMCPGoServer(s)), State: ...}, nil
//
// Release what a Subject holds (a database file, say) with t.Cleanup.
type Subject struct {
	// Server serves the tools under test, in process.
	Server *mcp.Server
	// Handler serves them over streamable HTTP, whichever library made it,
	// when Server is nil: go-sdk clients reach it on loopback.
	Handler http.Handler
	// State returns what the calls change (records, a counter) as a value
	// encoding/json marshals. Two runs ended alike when their States
	// marshal to the same JSON (maps have their keys sorted). Leave out
	// what differs from run to run by design: server-made ids, clocks.
	State func(ctx context.Context) (any, error)
}

// maxOrders bounds the orders AllOrders and Concurrently run, each on a
// fresh Subject: 5040 is every order of 7 distinct calls.
const maxOrders = 5040

// AllOrders sends calls one at a time on one connection, in every order,
// each order to a fresh Subject, and reports, as an error, two orders
// whose end states differ: what a server whose clients replay queued calls
// in any order must not show. Orders that differ only in where identical
// calls sit run once, so a call listed twice stands for a repeat. The
// calls may have at most 5040 orders (7 distinct calls).
//
// A tool error (a result with isError set) is an answer, not an error here:
// the states tell. An error from fresh, State or CallTool (a protocol or
// transport error) is returned, naming the order and the call.
func AllOrders(ctx context.Context, fresh func(ctx context.Context) (*Subject, error), calls ...*mcp.CallToolParams) error {
	sigs, err := signatures(fresh, calls)
	if err != nil {
		return err
	}
	all, err := orders(sigs)
	if err != nil {
		return err
	}
	var firstOrder []int
	var firstState json.RawMessage
	for _, order := range all {
		state, err := runInOrder(ctx, fresh, calls, order)
		if err != nil {
			return err
		}
		if firstOrder == nil {
			firstOrder, firstState = order, state
			continue
		}
		if !bytes.Equal(state, firstState) {
			return fmt.Errorf("idemtest: the calls in order %v ended in\n%s\nand in order %v in\n%s", firstOrder, firstState, order, state)
		}
	}
	return nil
}

// A Report is what Concurrently saw.
type Report struct {
	// Answers[i] is the answer to call i; nil where Errs[i] is not.
	Answers []*mcp.CallToolResult
	// Errs[i] is the error CallTool returned for call i (a protocol or
	// transport error; a tool error is an answer with isError set).
	Errs []error
	// Ran counts the answers neither replayed nor refused: the calls the
	// tool ran and answered. A tool that writes with neither a record key
	// nor an op id runs once per call.
	Ran int
	// Replayed counts the answers marked _meta["io.idemkit/replayed"]:
	// answered from the stored result of an earlier call with the op id.
	Replayed int
	// Refused counts the answers with isError set (busy, contended, a
	// refusal of the tool's own).
	Refused int
	// State is the Subject's state once every call returned, as JSON.
	State json.RawMessage
	// Once is the state after each distinct call ran once, one at a time,
	// on a fresh Subject: in the order whose end state is State when one
	// is, else in the order given.
	Once json.RawMessage
}

// Concurrently sends n calls at once to a fresh Subject, each on its own
// connection (as n clients would), call(i) being call i: the same
// params for a double tap or a retry storm, others for two devices that
// sync at the same moment. It reports what each got, and, as an error,
// that the state they left is not the state of each distinct call sent
// once, one at a time, in some order: a repeat had a further effect, or
// one write undid another's. A distinct call every copy of which was
// refused (isError) is left out of those orders: a refused call saves
// nothing. The distinct calls may have at most 5040 orders (7 calls).
//
// The Report is returned whenever the calls were sent, with the error too;
// an error from fresh, State or CallTool is returned as well.
func Concurrently(ctx context.Context, fresh func(ctx context.Context) (*Subject, error), n int, call func(i int) *mcp.CallToolParams) (*Report, error) {
	if n < 1 || call == nil {
		return nil, errors.New("idemtest: Concurrently needs n >= 1 and a call function")
	}
	calls := make([]*mcp.CallToolParams, n)
	for i := range calls {
		calls[i] = call(i)
	}
	sigs, err := signatures(fresh, calls)
	if err != nil {
		return nil, err
	}
	var distinct []string
	for _, s := range sigs {
		if !slices.Contains(distinct, s) {
			distinct = append(distinct, s)
		}
	}
	if _, err := orders(distinct); err != nil { // before sending anything
		return nil, err
	}
	subj, err := fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemtest: fresh: %w", err)
	}
	if err := subj.check(); err != nil {
		return nil, err
	}
	tg, release := subj.open()
	defer release()
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		if sessions[i], err = tg.connect(ctx); err != nil {
			for _, cs := range sessions[:i] {
				cs.Close()
			}
			return nil, fmt.Errorf("idemtest: connect: %w", err)
		}
	}
	r := &Report{Answers: make([]*mcp.CallToolResult, n), Errs: make([]error, n)}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Go(func() {
			defer cs.Close()
			<-start
			r.Answers[i], r.Errs[i] = cs.CallTool(ctx, clone(calls[i]))
		})
	}
	close(start)
	wg.Wait()

	// saved[s]: some copy of the distinct call s was answered, not refused.
	saved := map[string]bool{}
	for i, a := range r.Answers {
		switch {
		case a == nil:
		case a.IsError:
			r.Refused++
		case a.Meta[idem.MetaReplayed] == true:
			r.Replayed++
			saved[sigs[i]] = true
		default:
			r.Ran++
			saved[sigs[i]] = true
		}
	}
	if r.State, err = subj.snapshot(ctx); err != nil {
		return r, err
	}
	if err := errors.Join(r.Errs...); err != nil {
		return r, fmt.Errorf("idemtest: calls failed: %w", err)
	}

	var once []*mcp.CallToolParams // each distinct saved call, first copy
	var onceSigs []string
	for i, s := range sigs {
		if saved[s] && !slices.Contains(onceSigs, s) {
			once, onceSigs = append(once, calls[i]), append(onceSigs, s)
		}
	}
	all, err := orders(onceSigs)
	if err != nil {
		return r, err
	}
	for _, order := range all {
		state, err := runInOrder(ctx, fresh, once, order)
		if err != nil {
			return r, err
		}
		if r.Once == nil || bytes.Equal(state, r.State) {
			r.Once = state
		}
		if bytes.Equal(state, r.State) {
			return r, nil
		}
	}
	return r, fmt.Errorf("idemtest: %d calls at once (%d ran, %d replayed, %d refused) ended in\n%s\nwhere each distinct call sent once ends in\n%s", n, r.Ran, r.Replayed, r.Refused, r.State, r.Once)
}

func (s *Subject) check() error {
	switch {
	case s == nil || (s.Server == nil && s.Handler == nil) || s.State == nil:
		return errors.New("idemtest: fresh returned a Subject without a Server or a State")
	case s.Server != nil && s.Handler != nil:
		return errors.New("idemtest: fresh returned a Subject with both a Server and a Handler")
	}
	return nil
}

// open returns where s's server is reached, and a function that stops
// serving it.
func (s *Subject) open() (target, func()) {
	if s.Server != nil {
		return inProcess{s.Server}, func() {}
	}
	hs := NewHTTPServer(s.Handler)
	return hs, hs.Close
}

// snapshot returns the Subject's state as JSON.
func (s *Subject) snapshot(ctx context.Context) (json.RawMessage, error) {
	v, err := s.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemtest: State: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("idemtest: State: %w", err)
	}
	return b, nil
}

// signatures checks the arguments of AllOrders and Concurrently and
// returns, for each call, a string that is equal for identical calls.
func signatures(fresh func(context.Context) (*Subject, error), calls []*mcp.CallToolParams) ([]string, error) {
	if fresh == nil {
		return nil, errors.New("idemtest: no fresh function")
	}
	if len(calls) == 0 {
		return nil, errors.New("idemtest: no calls")
	}
	sigs := make([]string, len(calls))
	for i, p := range calls {
		if p == nil {
			return nil, fmt.Errorf("idemtest: call %d is nil", i)
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("idemtest: call %d: %w", i, err)
		}
		sigs[i] = string(b)
	}
	return sigs, nil
}

// orders returns every order of the calls whose signatures are sigs, as
// lists of indexes, leaving out an order that differs from another only in
// where identical calls sit; the first is the order given. More than
// maxOrders orders is an error.
func orders(sigs []string) ([][]int, error) {
	// groups[g] holds the indexes of the calls identical to the g-th
	// distinct one, in the order given.
	var groups [][]int
	for i, s := range sigs {
		if g := slices.IndexFunc(groups, func(g []int) bool { return sigs[g[0]] == s }); g >= 0 {
			groups[g] = append(groups[g], i)
		} else {
			groups = append(groups, []int{i})
		}
	}
	taken := make([]int, len(groups)) // how many of each group order holds
	var out [][]int
	var order []int
	var walk func() bool
	walk = func() bool {
		if len(order) == len(sigs) {
			out = append(out, slices.Clone(order))
			return len(out) <= maxOrders
		}
		for g, idx := range groups {
			if taken[g] == len(idx) {
				continue
			}
			order = append(order, idx[taken[g]])
			taken[g]++
			ok := walk()
			taken[g]--
			order = order[:len(order)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	if !walk() {
		return nil, fmt.Errorf("idemtest: the calls have more than %d orders; send fewer distinct calls", maxOrders)
	}
	return out, nil
}

// runInOrder sends calls in order to a fresh Subject, one at a time on one
// connection, and returns its state.
func runInOrder(ctx context.Context, fresh func(context.Context) (*Subject, error), calls []*mcp.CallToolParams, order []int) (json.RawMessage, error) {
	subj, err := fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemtest: fresh: %w", err)
	}
	if err := subj.check(); err != nil {
		return nil, err
	}
	tg, release := subj.open()
	defer release()
	cs, err := tg.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemtest: connect: %w", err)
	}
	defer cs.Close()
	for _, i := range order {
		if _, err := cs.CallTool(ctx, clone(calls[i])); err != nil {
			return nil, fmt.Errorf("idemtest: order %v, call %d (%s): %w", order, i, calls[i].Name, err)
		}
	}
	return subj.snapshot(ctx)
}

// clone returns a copy of p to send: the client writes its _meta, and one
// params may be sent many times, at once.
func clone(p *mcp.CallToolParams) *mcp.CallToolParams {
	c := *p
	c.Meta = maps.Clone(p.Meta)
	return &c
}
