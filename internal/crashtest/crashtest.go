// Package crashtest is the crash test of the op-id guarantee: a real server
// process (command crashserver) is killed with SIGKILL at chosen and at
// random points of a call, restarted on the same store, and its clients
// retry every unacknowledged call with the same op id. The test then reads
// the store directly and counts duplicates and lost committed ops
// (docs/production.md, "Crash safety").
//
// This file holds what the server and the test share: the tool, the
// documents it writes and where the server kills itself.
package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// ToolName is the name of the append tool.
const ToolName = "append"

// Args are the arguments of the append tool. Tag names the operation as the
// client means it (the test sends the op id there too), so that the store
// shows which operation each entry came from even when the server ignores op
// ids.
type Args struct {
	Log  string `json:"log" jsonschema:"the log to append to"`
	Tag  string `json:"tag" jsonschema:"the client's name for this operation"`
	Note string `json:"note" jsonschema:"free text stored with the entry"`
	// OpID is read by the middleware; the handler never looks at it.
	OpID string `json:"op_id,omitempty"`
}

// Appended is the answer of the append tool: the sequence number the server
// gave the new entry.
type Appended struct {
	Seq int64 `json:"seq"`
}

// Counter is the document that holds how many entries a log has. Each client
// of the test appends to a log of its own: a counter shared by concurrent
// calls makes the Firestore emulator hold them on its locks for seconds.
type Counter struct {
	N int64 `json:"n"`
}

// Entry is one appended entry.
type Entry struct {
	Seq  int64  `json:"seq"`
	Tag  string `json:"tag"`
	Note string `json:"note"`
}

// Limit is a log's cap on entries, which the tool reads in every call and
// never writes. The crash test sets none: every transaction holds a read of
// a document it does not write (a ConditionCheck on DynamoDB, a read
// checked again at the commit on Firestore), and a killed server's reads
// of it must neither change it nor hold up the calls after.
type Limit struct {
	Max int64 `json:"max"`
}

// LimitKey is the key of log's Limit.
func LimitKey(log string) idem.Key {
	return idem.Key{Collection: "crash_limits", ID: log}
}

// CodeLogFull is the code of a call refused because its log holds its
// Limit's entries.
const CodeLogFull idem.Code = "log_full"

// CounterKey is the key of log's counter.
func CounterKey(log string) idem.Key {
	return idem.Key{Collection: "crash_counters", ID: log}
}

// EntryKey is the key of log's entry number seq.
func EntryKey(log string, seq int64) idem.Key {
	return idem.Key{Collection: "crash_entries", ID: log + "-" + strconv.FormatInt(seq, 10)}
}

// Points where the server can kill itself during a call.
const (
	// PointStart: the handler has begun, inside the transaction, and has
	// written nothing.
	PointStart = "start"
	// PointWritten: the handler has made its writes in the open
	// transaction; the commit has not been sent.
	PointWritten = "written"
	// PointCommitted: the transaction committed (an AfterCommit hook) and
	// the response has not been sent.
	PointCommitted = "committed"
)

// Points are the kill points, in the order a call passes them.
var Points = []string{PointStart, PointWritten, PointCommitted}

// A KillPlan says where the server kills itself: at Point, during the first
// run of the handler from the Call-th on (counted from 1 over the process's
// life, attempts that lost a race included) that reaches Point. An attempt
// that loses a race with a concurrent call may end before it reaches the
// point, so the kill waits for the next. The zero plan never kills.
type KillPlan struct {
	Point string
	Call  int64
}

// ParseKillPlan parses POINT:CALL, such as "written:3"; "" is the zero plan.
func ParseKillPlan(s string) (KillPlan, error) {
	if s == "" {
		return KillPlan{}, nil
	}
	p, n, ok := strings.Cut(s, ":")
	call, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || call < 1 {
		return KillPlan{}, errors.New("want POINT:CALL with CALL a number from 1")
	}
	for _, q := range Points {
		if p == q {
			return KillPlan{Point: p, Call: call}, nil
		}
	}
	return KillPlan{}, fmt.Errorf("no such kill point: want one of %s", strings.Join(Points, ", "))
}

// String is the plan as ParseKillPlan reads it.
func (k KillPlan) String() string {
	if k.Point == "" {
		return ""
	}
	return k.Point + ":" + strconv.FormatInt(k.Call, 10)
}

// ReadyLine is what the server prints on stderr, followed by its URL, once
// it serves.
const ReadyLine = "crashserver: ready "

// KillLine is what the server prints on stderr, followed by the point,
// just before it kills itself.
const KillLine = "crashserver: SIGKILL at "

// die kills the process at once, as a power cut or the OOM killer would:
// no deferred function, no flush, no answer.
func die(point string) {
	fmt.Fprintln(os.Stderr, KillLine+point)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// Options configure Register.
type Options struct {
	// Kill is where the server kills itself.
	Kill KillPlan
	// Unsafe registers the tool without op ids: every call, retries
	// included, appends an entry. It exists to show that the test catches
	// the duplicates that op ids prevent.
	Unsafe bool
}

// Register adds the append tool to srv on store s: a write that is unsafe
// to repeat without its op id, since it appends an entry under the log's
// next number. It reads the log's Limit too, and refuses a log at it.
func Register(srv *mcp.Server, s idem.Store, o Options) {
	var calls atomic.Int64
	h := func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in Args) (*mcp.CallToolResult, Appended, error) {
		call := calls.Add(1)
		killAt := func(point string) {
			if o.Kill.Point == point && call >= o.Kill.Call {
				die(point)
			}
		}
		killAt(PointStart)
		if err := CounterKey(in.Log).Validate(); err != nil {
			return nil, Appended{}, &idem.Error{Code: idem.CodeInvalidArguments, Message: "log is not a valid document id"}
		}
		var c Counter
		v, err := tx.Get(ctx, CounterKey(in.Log), &c)
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			return nil, Appended{}, err
		}
		var lim Limit
		switch _, err := tx.Get(ctx, LimitKey(in.Log), &lim); {
		case err == nil && c.N >= lim.Max:
			return nil, Appended{}, &idem.Error{Code: CodeLogFull, Message: "the log holds as many entries as its limit allows"}
		case err != nil && !errors.Is(err, idem.ErrNotFound):
			return nil, Appended{}, err
		}
		c.N++
		if v == 0 {
			err = tx.Create(ctx, CounterKey(in.Log), c)
		} else {
			err = tx.Update(ctx, CounterKey(in.Log), v, c)
		}
		if err != nil {
			return nil, Appended{}, err
		}
		if err := tx.Create(ctx, EntryKey(in.Log, c.N), Entry{Seq: c.N, Tag: in.Tag, Note: in.Note}); err != nil {
			return nil, Appended{}, err
		}
		killAt(PointWritten)
		if o.Kill.Point == PointCommitted && call >= o.Kill.Call {
			idem.AfterCommit(ctx, func(context.Context) { die(PointCommitted) })
		}
		return nil, Appended{Seq: c.N}, nil
	}
	tool := &mcp.Tool{Name: ToolName, Description: "Append an entry to the log under the next number."}
	if o.Unsafe {
		idem.AddTool(srv, tool, s, h)
		return
	}
	idem.AddTool(srv, tool, s, h, idem.RequireOpID())
}
