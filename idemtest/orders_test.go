package idemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

type count struct {
	N int `json:"n"`
}

// unsafeState is what the unsafe tools change, in memory.
type unsafeState struct {
	mu      sync.Mutex // guards the fields
	Notes   []string   `json:"notes"`
	Counter int        `json:"counter"`
	Balance int        `json:"balance"`
}

// unsafeSubject serves tools that are unsafe to repeat or to run at once:
//   - append_note appends its text: a repeat appends again, and the order
//     of two appends shows;
//   - increment adds one to a counter: a repeat adds again;
//   - deposit reads the balance, waits, then writes the balance plus its
//     amount: two deposits at once lose one.
func unsafeSubject(ctx context.Context) (*idemtest.Subject, error) {
	st := &unsafeState{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "unsafe", Version: "v0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "append_note"}, func(ctx context.Context, req *mcp.CallToolRequest, in note) (*mcp.CallToolResult, count, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.Notes = append(st.Notes, in.Text)
		return nil, count{N: len(st.Notes)}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "increment"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, count, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.Counter++
		return nil, count{N: st.Counter}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "deposit"}, func(ctx context.Context, req *mcp.CallToolRequest, in expense) (*mcp.CallToolResult, count, error) {
		st.mu.Lock()
		b := st.Balance
		st.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // the others read the same balance meanwhile
		st.mu.Lock()
		defer st.mu.Unlock()
		st.Balance = b + in.Cents
		return nil, count{N: st.Balance}, nil
	})
	return &idemtest.Subject{Server: srv, State: func(context.Context) (any, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		return map[string]any{"notes": st.Notes, "counter": st.Counter, "balance": st.Balance}, nil
	}}, nil
}

type keyedNote struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// safeSubject serves the same writes made safe on a memory store: put_note
// writes the note named by its id (a record key), add adds to a ledger
// under a required op id (addToTotal). freshes counts the Subjects made.
func safeSubject(freshes *int) func(ctx context.Context) (*idemtest.Subject, error) {
	var mu sync.Mutex
	return func(ctx context.Context) (*idemtest.Subject, error) {
		mu.Lock()
		*freshes++
		mu.Unlock()
		s := memory.New(nil)
		srv := mcp.NewServer(&mcp.Implementation{Name: "safe", Version: "v0"}, nil)
		idem.AddTool(srv, &mcp.Tool{Name: "put_note"}, s,
			func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in keyedNote) (*mcp.CallToolResult, keyedNote, error) {
				return nil, in, tx.Put(ctx, idem.Key{Collection: "notes", ID: in.ID}, in)
			}, idem.RecordKeys("id"))
		idem.AddTool(srv, &mcp.Tool{Name: "add"}, s, addToTotal, idem.RequireOpID())
		return &idemtest.Subject{Server: srv, State: func(ctx context.Context) (any, error) {
			state := map[string]any{}
			err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				t, err := readTotal(ctx, tx)
				if err != nil {
					return err
				}
				state["total_cents"] = t.Cents
				for _, id := range []string{"n1", "n2"} {
					var n keyedNote
					if _, err := tx.Get(ctx, idem.Key{Collection: "notes", ID: id}, &n); err == nil {
						state[id] = n.Text
					} else if !errors.Is(err, idem.ErrNotFound) {
						return err
					}
				}
				return nil
			})
			return state, err
		}}, nil
	}
}

func params(tool string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}

// TestSendTwiceReportsUnsafeTools: a counter and an append answer
// differently the second time, and SameAnswer says so.
func TestSendTwiceReportsUnsafeTools(t *testing.T) {
	ctx := context.Background()
	subj, _ := unsafeSubject(ctx)
	cs, err := idemtest.Connect(ctx, subj.Server, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, p := range []*mcp.CallToolParams{params("increment", nil), params("append_note", map[string]any{"text": "a"})} {
		a, b, err := idemtest.SendTwice(ctx, cs, p)
		if err != nil {
			t.Fatal(err)
		}
		if idemtest.SameAnswer(a, b) == nil {
			t.Errorf("%s: SameAnswer found no difference between two runs", p.Name)
		}
	}
}

// TestAllOrdersReportsUnsafeTool: two appends end in two orders of the
// notes, and AllOrders names both orders and both states.
func TestAllOrdersReportsUnsafeTool(t *testing.T) {
	err := idemtest.AllOrders(context.Background(), unsafeSubject,
		params("append_note", map[string]any{"text": "a"}), params("append_note", map[string]any{"text": "b"}))
	if err == nil {
		t.Fatal("AllOrders found no difference between [a b] and [b a]")
	}
	for _, want := range []string{"order [0 1]", "order [1 0]", `"notes":["a","b"]`, `"notes":["b","a"]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestAllOrdersPassesSafeTools: keyed notes and op-id additions, one of
// them repeated, end alike in every order; identical calls are not
// reordered among themselves (4 calls, one repeated: 4!/2 orders).
func TestAllOrdersPassesSafeTools(t *testing.T) {
	freshes := 0
	err := idemtest.AllOrders(context.Background(), safeSubject(&freshes),
		params("put_note", map[string]any{"id": "n1", "text": "a"}),
		params("add", map[string]any{"cents": 5, "op_id": "op-1"}),
		params("add", map[string]any{"cents": 7, "op_id": "op-2"}),
		params("add", map[string]any{"cents": 5, "op_id": "op-1"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if freshes != 12 {
		t.Errorf("%d fresh Subjects, want 12 (one per distinct order)", freshes)
	}
}

// TestAllOrdersReportsLastWriteWins: two puts of one key with other texts
// are each safe to repeat, but their order decides the end state.
func TestAllOrdersReportsLastWriteWins(t *testing.T) {
	freshes := 0
	err := idemtest.AllOrders(context.Background(), safeSubject(&freshes),
		params("put_note", map[string]any{"id": "n1", "text": "a"}),
		params("put_note", map[string]any{"id": "n1", "text": "b"}))
	if err == nil || !strings.Contains(err.Error(), `"n1":"a"`) || !strings.Contains(err.Error(), `"n1":"b"`) {
		t.Fatalf("AllOrders: %v, want the two end states", err)
	}
}

func same(p *mcp.CallToolParams) func(int) *mcp.CallToolParams {
	return func(int) *mcp.CallToolParams { return p }
}

// TestConcurrentlyReportsUnsafeTools: identical increments and appends at
// once each run, and leave more than one call would; deposits of other
// amounts at once lose one another's writes.
func TestConcurrentlyReportsUnsafeTools(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		call      func(int) *mcp.CallToolParams
		state     string // in Report.State
		once      string // in Report.Once
		wantedRan int
	}{
		{"increment", same(params("increment", nil)), `"counter":4`, `"counter":1`, 4},
		{"append", same(params("append_note", map[string]any{"text": "a"})), `"notes":["a","a","a","a"]`, `"notes":["a"]`, 4},
		{"deposit", func(i int) *mcp.CallToolParams { return params("deposit", map[string]any{"cents": 1 << (i % 3)}) }, `"balance":`, `"balance":7`, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := idemtest.Concurrently(ctx, unsafeSubject, 4, c.call)
			if err == nil {
				t.Fatalf("Concurrently found nothing; state %s", r.State)
			}
			if r == nil {
				t.Fatalf("no report: %v", err)
			}
			if r.Ran != c.wantedRan || r.Replayed != 0 || r.Refused != 0 {
				t.Errorf("ran %d, replayed %d, refused %d", r.Ran, r.Replayed, r.Refused)
			}
			if !strings.Contains(string(r.State), c.state) || !strings.Contains(string(r.Once), c.once) {
				t.Errorf("state %s, once %s; want %s and %s", r.State, r.Once, c.state, c.once)
			}
			if strings.Contains(string(r.State), `"balance":7`) {
				t.Errorf("deposits at once lost nothing (state %s): the test server's race did not happen", r.State)
			}
			for i, a := range r.Answers {
				if a == nil || r.Errs[i] != nil {
					t.Errorf("call %d: %v", i, r.Errs[i])
				}
			}
		})
	}
}

// TestConcurrentlyPassesSafeTool: identical additions under one op id at
// once run once, the others replay; distinct ones all count.
func TestConcurrentlyPassesSafeTool(t *testing.T) {
	ctx := context.Background()
	freshes := 0
	r, err := idemtest.Concurrently(ctx, safeSubject(&freshes), 6, same(params("add", map[string]any{"cents": 5, "op_id": "op-1"})))
	if err != nil {
		t.Fatal(err)
	}
	if r.Ran != 1 || r.Replayed != 5 || r.Refused != 0 {
		t.Errorf("ran %d, replayed %d, refused %d; want 1, 5, 0", r.Ran, r.Replayed, r.Refused)
	}
	if got := stateField(t, r.State, "total_cents"); got != 5 {
		t.Errorf("total %v, want 5", got)
	}
	if string(r.Once) != string(r.State) {
		t.Errorf("once %s, state %s", r.Once, r.State)
	}

	r, err = idemtest.Concurrently(ctx, safeSubject(&freshes), 4, func(i int) *mcp.CallToolParams {
		return params("add", map[string]any{"cents": 1 << i, "op_id": fmt.Sprintf("op-%d", i)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ran+r.Refused != 4 {
		t.Errorf("ran %d, refused %d, replayed %d", r.Ran, r.Refused, r.Replayed)
	}
	if r.Refused == 0 && stateField(t, r.State, "total_cents") != 15 {
		t.Errorf("state %s, want a total of 15", r.State)
	}
}

func stateField(t *testing.T, state json.RawMessage, name string) float64 {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(state, &m); err != nil {
		t.Fatal(err)
	}
	f, _ := m[name].(float64)
	return f
}

// TestBadArguments: what AllOrders and Concurrently refuse, before or while
// sending.
func TestBadArguments(t *testing.T) {
	ctx := context.Background()
	freshes := 0
	fresh := safeSubject(&freshes)
	noState := func(context.Context) (*idemtest.Subject, error) {
		return &idemtest.Subject{Server: mcp.NewServer(&mcp.Implementation{Name: "x", Version: "v0"}, nil)}, nil
	}
	failing := func(context.Context) (*idemtest.Subject, error) { return nil, errors.New("no database") }
	note := params("put_note", map[string]any{"id": "n1", "text": "a"})
	var eight []*mcp.CallToolParams
	for i := range 8 {
		eight = append(eight, params("add", map[string]any{"cents": 1, "op_id": fmt.Sprintf("op-%d", i)}))
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no calls", idemtest.AllOrders(ctx, fresh), "no calls"},
		{"nil fresh", idemtest.AllOrders(ctx, nil, note), "no fresh function"},
		{"nil call", idemtest.AllOrders(ctx, fresh, note, nil), "call 1 is nil"},
		{"too many orders", idemtest.AllOrders(ctx, fresh, eight...), "more than 5040 orders"},
		{"no State", idemtest.AllOrders(ctx, noState, note), "without a Server or a State"},
		{"fresh fails", idemtest.AllOrders(ctx, failing, note), "no database"},
		{"unknown tool", idemtest.AllOrders(ctx, fresh, note, params("nosuch", nil)), "call 1 (nosuch)"},
		{"n = 0", second(idemtest.Concurrently(ctx, fresh, 0, same(note))), "n >= 1"},
		{"too many at once", second(idemtest.Concurrently(ctx, fresh, 8, func(i int) *mcp.CallToolParams { return eight[i] })), "more than 5040 orders"},
		{"unknown tool at once", second(idemtest.Concurrently(ctx, fresh, 2, same(params("nosuch", nil)))), "calls failed"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
