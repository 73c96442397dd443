package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/crashtest"
)

// op is one operation a client means to make once.
type op struct {
	log  string // the log it appends to
	id   string // the op id, also sent as the tag
	note string

	acked bool  // the client got its answer
	seq   int64 // the answer: the entry's number
	// changed is set when the client also sent the op id with another note;
	// changedCode is the code of the answer it got.
	changed     bool
	changedCode string
}

// counts are what the clients of one run saw.
type counts struct {
	calls, retries, replayed atomic.Int64
	unknown, busy, contended atomic.Int64
	changed, keyReused       atomic.Int64
	inflight                 atomic.Int64
	changedAccepted, givenUp atomic.Int64
	// slowest is the longest a call took to be answered, retries included,
	// in nanoseconds.
	slowest atomic.Int64
}

// took records that a call was answered after d.
func (c *counts) took(d time.Duration) {
	for {
		old := c.slowest.Load()
		if int64(d) <= old || c.slowest.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// retryable are the refusals a client answers by sending the same call
// again, with the same op id.
var retryable = map[string]bool{
	string(idem.CodeBusy): true, string(idem.CodeContended): true,
	string(idem.CodeUnknownOutcome): true, string(idem.CodeInternal): true,
}

// client is an app that mints op ids and retries every call it has no answer
// for, over the go-sdk's streamable HTTP client transport, reconnecting after
// every failure.
type client struct {
	url  string
	http *http.Client
	c    *counts
	cs   *mcp.ClientSession
}

// callTimeout bounds one attempt; the whole call gives up after giveUp.
const (
	callTimeout = 30 * time.Second
	giveUp      = 2 * time.Minute
)

func (cl *client) close() {
	if cl.cs != nil {
		cl.cs.Close()
		cl.cs = nil
	}
}

// call sends the append until it gets an answer that is not a transport
// failure or a retryable refusal, and returns it.
func (cl *client) call(ctx context.Context, o *op, note string) (*mcp.CallToolResult, error) {
	opID := o.id
	start := time.Now()
	defer func() { cl.c.took(time.Since(start)) }()
	deadline := start.Add(giveUp)
	params := &mcp.CallToolParams{Name: crashtest.ToolName, Arguments: crashtest.Args{Log: o.log, Tag: opID, Note: note, OpID: opID}}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if ctx.Err() != nil {
				return nil, ctx.Err() // the run was given up
			}
			cl.c.retries.Add(1)
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("no answer for op %s within %v", opID, giveUp)
			}
			time.Sleep(time.Duration(attempt%10) * 5 * time.Millisecond)
		}
		if cl.cs == nil {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			t := &mcp.StreamableClientTransport{Endpoint: cl.url, HTTPClient: cl.http, MaxRetries: -1, DisableStandaloneSSE: true}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "crash-client", Version: "v1"}, nil).Connect(cctx, t, nil)
			cancel()
			if err != nil {
				continue
			}
			cl.cs = cs
		}
		cl.c.calls.Add(1)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		cl.c.inflight.Add(1)
		res, err := cl.cs.CallTool(cctx, params)
		cl.c.inflight.Add(-1)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			cl.close() // the server died under it: start over
			continue
		}
		code := codeOf(res)
		switch code {
		case string(idem.CodeUnknownOutcome):
			cl.c.unknown.Add(1)
		case string(idem.CodeBusy):
			cl.c.busy.Add(1)
		case string(idem.CodeContended):
			cl.c.contended.Add(1)
		}
		if retryable[code] {
			continue
		}
		return res, nil
	}
}

// codeOf returns the idemkit code of a refused call, or "".
func codeOf(res *mcp.CallToolResult) string {
	if !res.IsError {
		return ""
	}
	code, _ := res.Meta[idem.MetaError].(string)
	if code == "" {
		return "no code"
	}
	return code
}

// seqOf returns the entry number of an answer.
func seqOf(res *mcp.CallToolResult) (int64, error) {
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		return 0, errors.New("the answer has no structured content")
	}
	f, ok := m["seq"].(float64)
	if !ok || f < 1 {
		return 0, errors.New("the answer has no seq")
	}
	return int64(f), nil
}

// runOps makes each op in turn and, for every op where change is true, sends
// its op id again with another note once it was answered.
func (cl *client) runOps(ctx context.Context, ops []*op, change func(i int) bool) error {
	defer cl.close()
	for i, o := range ops {
		res, err := cl.call(ctx, o, o.note)
		if err != nil {
			cl.c.givenUp.Add(1)
			return err
		}
		if code := codeOf(res); code != "" {
			return fmt.Errorf("op %s: refused with %s", o.id, code)
		}
		if o.seq, err = seqOf(res); err != nil {
			return fmt.Errorf("op %s: %w", o.id, err)
		}
		o.acked = true
		if r, _ := res.Meta[idem.MetaReplayed].(bool); r {
			cl.c.replayed.Add(1)
		}
		if !change(i) {
			continue
		}
		o.changed = true
		cl.c.changed.Add(1)
		res, err = cl.call(ctx, o, o.note+" (changed)")
		if err != nil {
			cl.c.givenUp.Add(1)
			return err
		}
		o.changedCode = codeOf(res)
		switch o.changedCode {
		case string(idem.CodeKeyReused):
			cl.c.keyReused.Add(1)
		case "":
			cl.c.changedAccepted.Add(1)
		}
	}
	return nil
}
