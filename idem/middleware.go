package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem/backend"
)

// HandlerFor is a typed tool handler that writes through tx. It mirrors
// [mcp.ToolHandlerFor] with the transaction added: everything it writes
// through tx commits together with the op record, or not at all. It must
// have no effect outside tx: it may run again if its transaction loses a
// race, and it may run, in a transaction that rolls back, on a repeat that
// reaches a handler which has not answered the op lately (see [ReadFirst]).
// Outbound effects go through [AfterCommit]; a handler that talks to the
// client while it runs (progress, elicitation) may want [ReadFirst].
//
// Returning an error, a result with IsError set, or a result with input
// requests rolls the transaction back and stores nothing, so a retry runs
// again. A returned *Error is sent to the caller with its code.
type HandlerFor[In, Out any] func(ctx context.Context, tx Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error)

// Tool wraps h into an [mcp.ToolHandlerFor] that is safe to call twice:
//
//   - With an op id (see [OpID]) the call is identified by (scope, tool, op
//     id). The first call runs h and stores its result in the same
//     transaction as h's writes; a repeat returns the stored result with
//     _meta["io.idemkit/replayed"] = true and keeps nothing h does (h runs
//     only when the repeat reaches a handler that has not answered the op
//     lately, and its transaction rolls back); a repeat with other
//     arguments is refused with key_reused; concurrent repeats wait for the
//     first and then replay.
//   - Without one, h runs in a transaction, and its keyed writes (see [Keys])
//     make the repeat harmless.
//
// The commit happens even if the request is cancelled after h returned. When
// the commit's outcome cannot be known, the call is refused with
// unknown_outcome and never retried inside the server.
//
// Use [AddTool] to register the tool with honest annotations.
func Tool[In, Out any](s Store, h HandlerFor[In, Out], opts ...Option) mcp.ToolHandlerFor[In, Out] {
	return newToolHandler(newConfig(opts), s, h)
}

func newToolHandler[In, Out any](c *config, s Store, h HandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	fl := &flights{m: make(map[Key]chan struct{})}
	recent := newRecentOps(recentOpsSize)
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		cl := &call[In, Out]{c: c, s: s, h: h, fl: fl, recent: recent, req: req, in: in}
		return cl.serve(ctx)
	}
}

type call[In, Out any] struct {
	c      *config
	s      Store
	h      HandlerFor[In, Out]
	fl     *flights
	recent *recentOps
	req    *mcp.CallToolRequest
	in     In

	tool    string
	scope   string
	opID    string
	key     Key
	attempt string // the id in the op record the latest attempt wrote

	inJSON []byte // the decoded arguments, encoded by encoding/json
	fp     string // see fingerprint
	fpErr  error
	hash   string // see argsHash
}

// errRollback makes Store.Run roll back a transaction whose result is sent
// but not kept (IsError results and input requests).
var errRollback = errors.New("idem: roll back")

func (cl *call[In, Out]) serve(ctx context.Context) (*mcp.CallToolResult, Out, error) {
	var zero Out
	if cl.req == nil || cl.req.Params == nil {
		return refuse[Out](ctx, NewError(CodeInternal, "no tool call request"))
	}
	cl.tool = cl.req.Params.Name
	args := parseArgs(cl.req.Params.Arguments, cl.c.argNames...)
	if cl.c.opID {
		id, err := opIDOf(args, cl.req.Params.Meta)
		if err != nil {
			return refuse[Out](ctx, asError(err))
		}
		cl.opID = id
	}
	if err := checkKeys(args, cl.c.keys); err != nil {
		return refuse[Out](ctx, err)
	}
	if cl.opID == "" {
		if cl.c.requireScope && cl.c.scope(ctx, cl.req) == "" {
			return refuse[Out](ctx, NewError(CodeScopeRequired, "this tool needs an authenticated caller"))
		}
		return cl.runPlain(ctx)
	}
	var refused *Error
	if cl.scope, refused = cl.c.opScope(ctx, cl.req); refused != nil {
		return refuse[Out](ctx, refused)
	}
	var err error
	if cl.inJSON, err = json.Marshal(cl.in); err != nil {
		return refuse[Out](ctx, cl.internal(ctx, "encoding arguments", err))
	}
	cl.key = OpKey(cl.scope, cl.tool, cl.opID)

	release, err := cl.fl.acquire(ctx, cl.key, cl.c.busyAfter)
	if err != nil {
		if errors.Is(err, errBusy) {
			return refuse[Out](ctx, &Error{Code: CodeBusy, Message: "the same operation is still running; retry later with the same op_id", OpID: cl.opID})
		}
		return nil, zero, err
	}
	defer release()
	return cl.runOp(ctx)
}

// outcome is what one transaction attempt produced.
type outcome[Out any] struct {
	res      *mcp.CallToolResult
	out      Out
	replayed bool
	handler  error
}

func (cl *call[In, Out]) runOp(ctx context.Context) (*mcp.CallToolResult, Out, error) {
	var o outcome[Out]
	// A store that reads outside transactions answers a replay with that
	// one read, and a first call then need not read the op record again in
	// its first attempt: the op record's Create refuses a duplicate that
	// committed in between, and the retry replays it. The read itself is
	// made only for op ids this handler answered lately (a client's retry
	// after a lost response) or with ReadFirst: any other first attempt
	// skips it, and a duplicate from elsewhere costs a retried transaction
	// instead (see docs/middleware.md, "Reading the op record").
	skipRead := false
	if r, ok := cl.s.(backend.Reader); ok {
		skipRead = true
		if cl.c.readFirst || cl.recent.has(cl.key) {
			var rec opAnswer
			_, err := r.Read(ctx, cl.key, &rec)
			switch {
			case err == nil:
				// A repeat may match without the fingerprint: see
				// sameArgs.
				return cl.finish(ctx, &o, nil, cl.fromRecord(rec.record(), &o))
			case !errors.Is(err, ErrNotFound):
				skipRead = false // the transaction reads the op record itself
			}
		}
	}
	// The handler is about to run, and its op record will need the
	// fingerprint: arguments that cannot be fingerprinted are refused first.
	if _, err := cl.fingerprint(); err != nil {
		return refuse[Out](ctx, cl.internal(ctx, "fingerprinting arguments", err))
	}
	attempt := 0
	hooks, err := runTx(context.WithoutCancel(ctx), cl.s, func(tctx context.Context, tx Tx) error {
		attempt++
		o = outcome[Out]{}
		if !skipRead || attempt > 1 {
			var rec opAnswer
			_, err := tx.Get(tctx, cl.key, &rec)
			switch {
			case err == nil:
				return cl.fromRecord(rec.record(), &o)
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		if err := cl.runHandler(ctx, tctx, tx, &o); err != nil {
			return err
		}
		now := cl.c.now()
		resJSON, err := json.Marshal(o.res)
		if err != nil {
			return fmt.Errorf("idem: encoding result: %w", err)
		}
		outJSON, err := json.Marshal(o.out)
		if err != nil {
			return fmt.Errorf("idem: encoding output: %w", err)
		}
		fp, err := cl.fingerprint()
		if err != nil {
			return fmt.Errorf("idem: fingerprinting arguments: %w", err)
		}
		cl.attempt = newAttemptID()
		rec := OpRecord{
			Scope: cl.scope, Tool: cl.tool, OpID: cl.opID, Fingerprint: fp, ArgsHash: cl.argsHash(),
			Result: resJSON, Output: outJSON,
			CommittedAt: now.UTC(), ExpiresAt: now.Add(cl.c.ttl).UTC(),
			Attempt: cl.attempt,
		}
		err = tx.Create(tctx, cl.key, &rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())
		if errors.Is(err, ErrExists) {
			// A call with this op id committed first. Answer its record
			// and roll this attempt back; a store that cannot read it
			// here retries the transaction, which then replays.
			var ans opAnswer
			if _, gerr := tx.Get(tctx, cl.key, &ans); gerr == nil {
				o = outcome[Out]{}
				if err := cl.fromRecord(ans.record(), &o); err != nil {
					return err
				}
				return errRollback
			}
			return fmt.Errorf("%w: op record created concurrently", ErrConflict)
		}
		return err
	})
	switch {
	case o.replayed && errors.Is(err, errRollback):
		err = nil // answered from the record the attempt's create found
	case skipRead && attempt == 1 && err != nil && (errors.Is(err, errRollback) || o.handler != nil):
		// The attempt that skipped the read failed in the handler, which
		// may have met the writes of a duplicate that committed before
		// the transaction (a session already stopped). If that
		// duplicate's op record is there, answer from it, as the
		// in-transaction read would have.
		var rec opAnswer
		if _, rerr := cl.s.(backend.Reader).Read(ctx, cl.key, &rec); rerr == nil {
			var p *panicError
			if errors.As(err, &p) {
				cl.logPanic(ctx, p) // answered from the record, but still a bug to see
			}
			o = outcome[Out]{}
			return cl.finish(ctx, &o, nil, cl.fromRecord(rec.record(), &o))
		}
	}
	return cl.finish(ctx, &o, hooks, err)
}

const keyReusedMessage = "this op_id was already used with other arguments; mint a new op_id for a new operation"

// fromRecord answers from a live op record: its result if the arguments
// match, key_reused if they do not.
func (cl *call[In, Out]) fromRecord(rec *OpRecord, o *outcome[Out]) error {
	if !cl.sameArgs(rec) {
		return NewError(CodeKeyReused, keyReusedMessage)
	}
	res, out, err := decodeStored[Out](rec)
	if err != nil {
		return err
	}
	o.res, o.out, o.replayed = res, out, true
	return nil
}

func (cl *call[In, Out]) runPlain(ctx context.Context) (*mcp.CallToolResult, Out, error) {
	var o outcome[Out]
	hooks, err := runTx(context.WithoutCancel(ctx), cl.s, func(tctx context.Context, tx Tx) error {
		o = outcome[Out]{}
		return cl.runHandler(ctx, tctx, tx, &o)
	})
	return cl.finish(ctx, &o, hooks, err)
}

// sameArgs reports whether rec was stored for this call's arguments: their
// encoding byte for byte, or else the same canonical fingerprint.
func (cl *call[In, Out]) sameArgs(rec *OpRecord) bool {
	if rec.ArgsHash != "" && rec.ArgsHash == cl.argsHash() {
		if cl.fp == "" {
			cl.fp = rec.Fingerprint // for logs and events
		}
		return true
	}
	fp, err := cl.fingerprint()
	return err == nil && fp == rec.Fingerprint
}

// fingerprint returns the call's [Fingerprint], computed once.
func (cl *call[In, Out]) fingerprint() (string, error) {
	if cl.fp == "" && cl.fpErr == nil {
		cl.fp, cl.fpErr = Fingerprint(cl.inJSON)
	}
	return cl.fp, cl.fpErr
}

// argsHash returns the hex SHA-256 of the call's arguments as encoding/json
// wrote them, computed once.
func (cl *call[In, Out]) argsHash() string {
	if cl.hash == "" {
		sum := sha256.Sum256(cl.inJSON)
		cl.hash = hex.EncodeToString(sum[:])
	}
	return cl.hash
}

// runHandler calls the handler with a context that has the transaction's
// values and the request's cancellation. It returns errRollback for results
// that are answered but not kept, and the handler's error otherwise.
func (cl *call[In, Out]) runHandler(reqCtx, tctx context.Context, tx Tx, o *outcome[Out]) error {
	hctx, cancel := context.WithCancelCause(tctx)
	stop := context.AfterFunc(reqCtx, func() { cancel(context.Cause(reqCtx)) })
	defer func() {
		stop()
		cancel(nil)
	}()
	res, out, err := cl.callHandler(hctx, tx)
	o.res, o.out = res, out
	if err != nil {
		o.handler = err
		return err
	}
	if res != nil && (res.IsError || res.InputRequests != nil) {
		return errRollback
	}
	return nil
}

// callHandler turns a panic in the handler into an error.
func (cl *call[In, Out]) callHandler(ctx context.Context, tx Tx) (res *mcp.CallToolResult, out Out, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return cl.h(ctx, tx, cl.req, cl.in)
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("idem: tool handler panicked: %v", p.value) }

func (cl *call[In, Out]) finish(ctx context.Context, o *outcome[Out], hooks *afterCommitList, err error) (*mcp.CallToolResult, Out, error) {
	var zero Out
	if cl.opID != "" && (err == nil || errors.Is(err, ErrUnknownOutcome)) {
		cl.recent.add(cl.key)
	}
	switch {
	case err == nil:
		if o.replayed {
			cl.event(ctx, cl.c.onReplay, nil)
			if cl.c.logger.Enabled(ctx, slog.LevelDebug) {
				cl.c.logger.LogAttrs(ctx, slog.LevelDebug, "idem: replayed stored result", cl.attrs()...)
			}
			return o.res, o.out, nil
		}
		hooks.run(context.WithoutCancel(ctx))
		return o.res, o.out, nil
	case errors.Is(err, errRollback):
		return o.res, o.out, nil
	case o.handler != nil:
		var p *panicError
		if errors.As(err, &p) {
			cl.logPanic(ctx, p)
			return refuse[Out](ctx, NewError(CodeInternal, "the tool failed and nothing was saved; it is safe to retry"))
		}
		var e *Error
		if errors.As(err, &e) {
			return refuse[Out](ctx, e)
		}
		return nil, zero, err
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		if e.Code == CodeKeyReused {
			cl.event(ctx, cl.c.onKeyReused, nil)
			cl.c.logger.LogAttrs(ctx, slog.LevelWarn, "idem: op id reused with other arguments", cl.attrs()...)
		}
		return refuse[Out](ctx, e)
	case errors.Is(err, ErrUnknownOutcome):
		return cl.unknown(ctx, err, hooks)
	case errors.Is(err, errStoredAnswer):
		return refuse[Out](ctx, cl.internal(ctx, "this operation committed, but its stored answer cannot be given back; call get_operation for it, and do not send it again under a new op_id", err))
	case errors.Is(err, ErrConflict) && cl.opID != "":
		return refuse[Out](ctx, &Error{Code: CodeBusy, Message: "the operation lost too many races with concurrent writes and was not saved; retry later with the same op_id", OpID: cl.opID})
	case errors.Is(err, ErrTooLarge):
		return refuse[Out](ctx, cl.internal(ctx, "the result is too large to store; nothing was saved", err))
	}
	return refuse[Out](ctx, cl.internal(ctx, "the change was not saved; it is safe to retry", err))
}

// unknown handles a commit whose outcome is unknown: it looks the op record
// up once, and answers unknown_outcome if that does not settle it. If the
// record is there (and ours: the fingerprint matches), the commit landed and
// hooks, the committing attempt's, run.
func (cl *call[In, Out]) unknown(ctx context.Context, cause error, hooks *afterCommitList) (*mcp.CallToolResult, Out, error) {
	if cl.opID != "" {
		rec, err := LookupOp(context.WithoutCancel(ctx), cl.s, cl.scope, cl.tool, cl.opID)
		if err == nil && !cl.sameArgs(rec) {
			// Another call's record, with other arguments: ours cannot
			// have been created beside it.
			return cl.finish(ctx, &outcome[Out]{}, nil, NewError(CodeKeyReused, keyReusedMessage))
		}
		if err == nil {
			if res, out, err := decodeStored[Out](rec); err == nil {
				if cl.attempt != "" && rec.Attempt == cl.attempt {
					// Our commit landed: its after-commit hooks are due.
					hooks.run(context.WithoutCancel(ctx))
					delete(res.Meta, MetaReplayed)
					return res, out, nil
				}
				// Another call's commit (a repeat that reached this
				// process before its first answer, or raced it): ours did
				// not land, since the op record cannot be created twice.
				// Answer as a replay; our hooks are not due.
				cl.event(ctx, cl.c.onReplay, nil)
				return res, out, nil
			}
		}
	}
	cl.event(ctx, cl.c.onUnknown, cause)
	cl.c.logger.LogAttrs(ctx, slog.LevelError, "idem: commit outcome unknown", append(cl.attrs(), slog.String("error", cause.Error()))...)
	msg := "the server cannot tell whether the change was saved; read the record before retrying"
	if cl.opID != "" {
		msg = "the server cannot tell whether the change was saved; call get_operation with this op_id before retrying"
	}
	return refuse[Out](ctx, &Error{Code: CodeUnknownOutcome, Message: msg, OpID: cl.opID})
}

func (cl *call[In, Out]) internal(ctx context.Context, msg string, err error) *Error {
	cl.c.logger.LogAttrs(ctx, slog.LevelError, "idem: "+msg, append(cl.attrs(), slog.String("error", err.Error()))...)
	return NewError(CodeInternal, msg)
}

func (cl *call[In, Out]) logPanic(ctx context.Context, p *panicError) {
	cl.c.logger.LogAttrs(ctx, slog.LevelError, "idem: tool handler panicked; rolled back",
		append(cl.attrs(), slog.Any("panic", p.value), slog.String("stack", string(p.stack)))...)
}

func (cl *call[In, Out]) attrs() []slog.Attr {
	a := []slog.Attr{slog.String("tool", cl.tool)}
	if cl.fp != "" {
		a = append(a, slog.String("fingerprint", cl.fp))
	}
	return a
}

func (cl *call[In, Out]) event(ctx context.Context, f func(context.Context, Event), err error) {
	if f != nil {
		f(ctx, Event{Tool: cl.tool, Scope: cl.scope, OpID: cl.opID, Fingerprint: cl.fp, Err: err})
	}
}

// errStoredAnswer: an op record whose answer cannot be given back. The
// operation committed; only the replay fails.
var errStoredAnswer = errors.New("idem: the stored answer cannot be decoded")

func decodeStored[Out any](rec *OpRecord) (*mcp.CallToolResult, Out, error) {
	var out Out
	res, err := rec.decodeResult()
	if err != nil {
		return nil, out, fmt.Errorf("%w: %w", errStoredAnswer, err)
	}
	if len(rec.Output) > 0 && string(rec.Output) != "null" {
		if rv := reflect.ValueOf(&out).Elem(); rv.Kind() == reflect.Interface && reflect.TypeFor[json.RawMessage]().Implements(rv.Type()) {
			// An interface output (any) has no output schema: the SDK sent
			// the handler's encoding as it was. Give it back byte for byte
			// rather than as decoded maps and float64s.
			rv.Set(reflect.ValueOf(json.RawMessage(rec.Output)))
		} else if err := json.Unmarshal(rec.Output, &out); err != nil {
			return nil, out, fmt.Errorf("%w: %w", errStoredAnswer, err)
		}
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaReplayed] = true
	return res, out, nil
}

// checkKeys refuses a call whose record-key arguments are absent, null or
// empty strings. Messages name the argument, never a value.
func checkKeys(args map[string]json.RawMessage, keys []string) *Error {
	for _, k := range keys {
		raw, ok := args[k]
		if !ok || string(raw) == "null" || string(raw) == `""` {
			return NewError(CodeMissingKey, fmt.Sprintf("argument %q is required: it names the record this call writes", k))
		}
	}
	return nil
}

// refusal turns an *Error into the tool result a caller sees.
func refusal(e *Error) *mcp.CallToolResult {
	meta := mcp.Meta{MetaError: string(e.Code)}
	text := e.Message
	if len(e.Candidates) > 0 {
		meta[MetaCandidates] = e.Candidates
		b, _ := json.Marshal(e.Candidates)
		text += " Candidates: " + string(b)
	}
	if e.OpID != "" {
		meta[MetaOpIDResult] = e.OpID
	}
	return &mcp.CallToolResult{
		Meta:    meta,
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
	}
}

func refusalOf(err error) *mcp.CallToolResult { return refusal(asError(err)) }

// asError returns the *Error in err's chain, or an internal one.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return NewError(CodeInternal, "the call was refused")
}

// refuse answers e. Under AddTool's receiving middleware it returns e as
// the handler's error: the SDK then builds an error result without running
// its output handling (which would validate the zero output against the
// tool's output schema, and could turn the refusal into a protocol error),
// and the middleware turns it into the refusal result. Otherwise it returns
// the refusal result itself.
func refuse[Out any](ctx context.Context, e *Error) (*mcp.CallToolResult, Out, error) {
	var zero Out
	if ctx.Value(restorerKey{}) != nil {
		return nil, zero, e
	}
	return refusal(e), zero, nil
}

// runTx is Store.Run with AfterCommit hooks, returning the hooks of the
// attempt that committed for the caller to run.
//
// On ErrUnknownOutcome it returns the hooks of the last attempt too: that
// attempt's commit may have landed, and the caller runs them if a lookup
// confirms it did.
func runTx(ctx context.Context, s Store, fn func(ctx context.Context, tx Tx) error) (*afterCommitList, error) {
	var l *afterCommitList
	err := s.Run(ctx, func(ctx context.Context, tx Tx) error {
		l = &afterCommitList{}
		return fn(context.WithValue(ctx, afterCommitKey{}, l), tx)
	})
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, ErrUnknownOutcome):
		return l, err
	}
	return nil, err
}

// flights lets one call per op key run at a time through one wrapped
// handler, so a concurrent duplicate waits for the first and then replays its
// result instead of running the handler too. Across handlers and processes
// the op record's create-if-absent in the store gives the same guarantee at
// the price of a retried transaction.
type flights struct {
	mu sync.Mutex // guards m
	m  map[Key]chan struct{}
}

var errBusy = errors.New("idem: busy")

func (f *flights) acquire(ctx context.Context, k Key, wait time.Duration) (release func(), err error) {
	var timeout <-chan time.Time // made on the first wait only
	for {
		f.mu.Lock()
		done, running := f.m[k]
		if !running {
			done = make(chan struct{})
			f.m[k] = done
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.m, k)
				f.mu.Unlock()
				close(done)
			}, nil
		}
		f.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-done:
		case <-timeout:
			return nil, errBusy
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
