package idem

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
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
// again. A returned *Error is sent to the caller with its code; any other
// error with code not_saved and the error's text, which must not hold
// argument values either.
type HandlerFor[In, Out any] func(ctx context.Context, tx Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error)

// tool is one wrapped handler: what it publishes, how its calls are checked,
// and the state its calls share.
type tool[In, Out any] struct {
	desc   *mcp.Tool
	c      *config
	s      Store
	h      HandlerFor[In, Out]
	in     *inputCheck
	out    output
	fl     *flights
	recent *recentOps
}

// output says how a handler's Out becomes structured content.
type output struct {
	isInterface bool // Out is an interface type (any): no output schema, no content for nil
	elemZero    any  // for a pointer Out, the zero of its element, sent for a nil pointer
	// byPointer: Out is neither a pointer nor an interface, and encoding/json
	// writes it through a pointer as it writes the value (see encodesAlike),
	// so the call encodes its own copy by pointer instead of boxing one.
	byPointer bool
}

func outputOf[Out any]() output {
	rt := reflect.TypeFor[Out]()
	o := output{isInterface: rt.Kind() == reflect.Interface}
	if rt.Kind() == reflect.Pointer {
		o.elemZero = reflect.Zero(rt.Elem()).Interface()
	}
	o.byPointer = rt.Kind() != reflect.Pointer && !o.isInterface && encodesAlike(rt, map[reflect.Type]bool{})
	return o
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodesAlike reports whether encoding/json writes a value of type t the
// same whether or not the value is addressable: whether no type in t's
// addressable positions (t, its struct fields and array elements, through
// every level) has MarshalJSON or MarshalText on its pointer only, which
// encoding/json calls only for an addressable value. Slice elements and
// pointer targets are addressable either way, map values and interface
// contents never.
func encodesAlike(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	pt := reflect.PointerTo(t)
	if pt.Implements(jsonMarshaler) && !t.Implements(jsonMarshaler) || pt.Implements(textMarshaler) && !t.Implements(textMarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if !encodesAlike(t.Field(i).Type, seen) {
				return false
			}
		}
	case reflect.Array:
		return encodesAlike(t.Elem(), seen)
	}
	return true
}

// encode returns the structured content for out, or nil for none.
func (o output) encode(out any) (json.RawMessage, error) {
	if v := reflect.ValueOf(out); !v.IsValid() || (o.elemZero != nil && v.IsNil()) {
		if o.elemZero == nil {
			return nil, nil // an interface Out that is nil
		}
		out = o.elemZero
	}
	return json.Marshal(out)
}

// handle is the tool's mcp.ToolHandler. It answers every call with a result,
// never a protocol error.
func (t *tool[In, Out]) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if req == nil || req.Params == nil {
		return refusal(newError(CodeInternal, "no tool call request")), nil
	}
	cl := &call[In, Out]{t: t, c: t.c, req: req, tool: req.Params.Name, ctx: ctx}
	a, err := cl.serve(ctx)
	if err != nil {
		return refusal(err), nil
	}
	return a.result(&cl.parts), nil
}

// An answer is what a call sends back when it is not refused.
type answer struct {
	res      *mcp.CallToolResult // the handler's result, or a fresh copy of the stored one; may be nil
	out      json.RawMessage     // structured content, or nil
	outText  string              // out as a string, once text made it
	replayed bool
}

// text returns the structured content as a string, made once: the op
// record and the result's text copy share it.
func (a *answer) text() string {
	if a.outText == "" {
		a.outText = string(a.out)
	}
	return a.outText
}

// result builds the tool result as the SDK does for typed handlers: the
// structured output, and a text copy of it when the handler sent no content
// (or sent content beside an output that is not an object). The parts it
// makes are in parts.
func (a *answer) result(parts *resultParts) *mcp.CallToolResult {
	res := a.res
	if res == nil {
		res = &parts.res
	}
	if a.replayed {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[MetaReplayed] = true
	}
	if res.IsError {
		if _, coded := res.Meta[MetaError]; !coded {
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			res.Meta[MetaError] = string(CodeNotSaved)
		}
		return res
	}
	if res.InputRequests != nil || len(a.out) == 0 {
		return res
	}
	res.StructuredContent = a.out
	if res.Content == nil {
		parts.text.Text = a.text()
		parts.content[0] = &parts.text
		res.Content = parts.content[:]
	} else if a.out[0] != '{' {
		res.Content = append(res.Content, &mcp.TextContent{Text: a.text()})
	}
	return res
}

// resultParts are the parts of a result answer.result makes.
type resultParts struct {
	res     mcp.CallToolResult
	text    mcp.TextContent
	content [1]mcp.Content
}

// call is one tool call on its way through the middleware. It holds, besides
// what the call knows, the parts of what it makes (the op record, the answer
// and its result, the transaction's state), so that a call allocates them
// with itself. A call is not reused: the handler's context and the result
// point into it.
type call[In, Out any] struct {
	t      *tool[In, Out]
	c      *config
	req    *mcp.CallToolRequest
	ctx    context.Context // the request's
	in     In
	output Out // the handler's, from the latest attempt
	tool   string

	scope   string
	opID    string
	key     Key
	attempt string // the id in the op record the latest attempt wrote
	// the first attempt's id, made with the hashes (see prepareRecord)
	firstAttempt string

	inJSON []byte // the decoded arguments, encoded by encoding/json
	fp     string // see fingerprint
	fpErr  error
	hash   string // see argsHash

	hctx     handlerContext // the handler's context, kept here to save an allocation
	hctxUsed bool

	// What transact's attempts found, kept here for the same reason.
	attempts      int
	handlerFailed bool
	skipRead      bool // the first attempt does not read the op record
	found         *oprecord.Record
	answered      *answer

	flight  flight
	run     txRun
	ans     answer
	rec     oprecord.Record
	recOpts [2]backend.WriteOption
	parts   resultParts
}

// serve checks the call, then runs it with or without an op id.
func (cl *call[In, Out]) serve(ctx context.Context) (*answer, *Error) {
	if err := cl.check(); err != nil {
		return nil, err
	}
	if cl.opID == "" {
		if cl.c.requireScope && cl.c.scope(ctx, cl.req) == "" {
			return nil, newError(CodeScopeRequired, "this tool needs an authenticated caller")
		}
		return cl.runPlain(ctx)
	}
	var refused *Error
	if cl.scope, refused = cl.c.opScope(ctx, cl.req); refused != nil {
		return nil, refused
	}
	var err error
	if cl.inJSON, err = json.Marshal(cl.in); err != nil {
		return nil, cl.internal(ctx, "encoding arguments", err)
	}
	cl.key = oprecord.Key(cl.scope, cl.tool, cl.opID)
	err = cl.t.fl.acquire(ctx, cl.key, cl.c.busyAfter, &cl.flight)
	if err != nil {
		if errors.Is(err, errBusy) {
			return nil, &Error{Code: CodeBusy, Message: "the same operation is still running; retry later with the same op_id", OpID: cl.opID}
		}
		return nil, newError(CodeInternal, "the call was cancelled while it waited for the same operation; nothing was saved by it")
	}
	defer cl.t.fl.release(cl.key, &cl.flight)
	return cl.runOp(ctx)
}

// check refuses, before anything runs, a call whose op id, record keys or
// arguments are not well formed, in that order, and decodes the arguments.
func (cl *call[In, Out]) check() *Error {
	raw := cl.req.Params.Arguments
	args, invalid := cl.t.in.check(raw)
	// The op id and the keys are checked first, even when the rest of the
	// arguments fails the schema; named is empty for absent or null
	// arguments. Arguments the check took are valid JSON.
	named, isObject := parseArgs(raw)
	if !isObject && invalid != nil {
		return invalid // not a JSON object, or not JSON at all
	}
	if cl.c.opID {
		id, refused := opIDOf(named, cl.req.Params.Meta)
		if refused != nil {
			return refused
		}
		cl.opID = id
	}
	if cl.c.requireOpID && cl.opID == "" {
		return newError(CodeInvalidOpID, "this tool requires an op_id: mint one per operation before the first attempt and resend it on every retry")
	}
	if refused := checkKeys(named, cl.c.keys); refused != nil {
		return refused
	}
	if invalid != nil {
		return invalid
	}
	err := json.Unmarshal(args, &cl.in)
	if err != nil {
		// JSON Schema counts 1.0 as an integer, encoding/json does not.
		if whole, ok := wholeNumbersAsIntegers(args); ok {
			var in In
			if json.Unmarshal(whole, &in) == nil {
				cl.in, err = in, nil
			}
		}
	}
	if err != nil {
		msg := "the arguments do not match the tool's input"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// Only a property the schema names: deeper paths can hold
			// the caller's map keys.
			name, _, _ := strings.Cut(te.Field, ".")
			if _, ok := cl.t.in.schema.Properties[name]; ok {
				msg = fmt.Sprintf("argument %q cannot be read as %s", name, te.Type)
			}
		}
		return newError(CodeInvalidArguments, msg)
	}
	return nil
}

// runPlain runs a call without an op id: the handler in a transaction, its
// keyed writes making a repeat harmless.
func (cl *call[In, Out]) runPlain(ctx context.Context) (*answer, *Error) {
	hooks, err := runTx(context.WithoutCancel(ctx), cl.t.s, &cl.run, cl)
	return cl.finish(ctx, cl.answered, hooks, err)
}

// runAttempt is one attempt of the call's transaction (txBody).
func (cl *call[In, Out]) runAttempt(tctx context.Context, tx Tx) error {
	if cl.opID == "" {
		a, err := cl.runHandler(cl.ctx, tctx, tx)
		cl.answered = a
		return err
	}
	return cl.tryOnce(cl.ctx, tctx, tx)
}

// runOp runs a call with an op id. It answers from the op record when one is
// live (a replay, or key_reused for other arguments), and otherwise runs the
// handler and creates the op record in the same transaction. The steps:
//
//  1. readFirst: a repeat of an op id this handler answered lately is
//     answered with one read, on stores that can read outside a transaction.
//  2. transact: the handler and the op record's create, in one transaction;
//     an op record found inside it (read, or met by the create) is answered.
//  3. After a failed first attempt that skipped the read, the record of a
//     duplicate that committed in between is looked for: the handler may
//     have failed on that duplicate's writes.
//  4. After a commit of unknown outcome, the record settles it if it can.
func (cl *call[In, Out]) runOp(ctx context.Context) (*answer, *Error) {
	r, canRead := cl.t.s.(backend.Reader)
	skipRead := canRead // the op record's create at commit catches a duplicate
	if canRead && (cl.c.readFirst || cl.t.recent.has(cl.key)) {
		rec, err := cl.read(ctx, r)
		if rec != nil {
			return cl.replay(ctx, rec, nil)
		}
		skipRead = err == nil // on a failed read the transaction reads it itself
	}
	// The handler is about to run, and its op record will need the
	// fingerprint: arguments that cannot be fingerprinted are refused first.
	if err := cl.prepareRecord(); err != nil {
		return nil, cl.internal(ctx, "fingerprinting arguments", err)
	}
	a, rec, hooks, failedFirst, err := cl.transact(ctx, skipRead)
	if rec == nil && failedFirst {
		rec, _ = cl.read(ctx, r)
		if rec != nil {
			var p *panicError
			if errors.As(err, &p) {
				cl.logPanic(ctx, p) // answered from the record, but still a bug to see
			}
		}
	}
	if rec != nil {
		return cl.replay(ctx, rec, nil)
	}
	if errors.Is(err, ErrUnknownOutcome) {
		return cl.unknown(ctx, err, hooks)
	}
	return cl.finish(ctx, a, hooks, err)
}

// read reads the op record outside a transaction: nil and nil when there is
// none.
func (cl *call[In, Out]) read(ctx context.Context, r backend.Reader) (*oprecord.Record, error) {
	rec := new(oprecord.Record)
	_, err := r.Read(ctx, cl.key, rec)
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, ErrNotFound):
		return nil, nil
	}
	return nil, err
}

// errAnswered rolls back an attempt that found the op record: the call is
// answered from it.
var errAnswered = errors.New("idem: answered from the op record")

// transact runs the handler and creates the op record in one transaction.
// It returns the handler's answer, or the op record the transaction found;
// failedFirst reports a first attempt that skipped reading the op record and
// failed in the handler.
func (cl *call[In, Out]) transact(ctx context.Context, skipRead bool) (a *answer, rec *oprecord.Record, hooks *afterCommitList, failedFirst bool, err error) {
	cl.skipRead = skipRead
	hooks, err = runTx(context.WithoutCancel(ctx), cl.t.s, &cl.run, cl)
	a, rec = cl.answered, cl.found
	if errors.Is(err, errAnswered) {
		return nil, rec, nil, false, nil
	}
	failedFirst = skipRead && cl.attempts == 1 && cl.handlerFailed
	if errors.Is(err, errRollback) && a != nil {
		return a, nil, nil, failedFirst, nil // answered, not kept
	}
	return a, nil, hooks, failedFirst, err
}

// tryOnce is one attempt of transact's transaction.
func (cl *call[In, Out]) tryOnce(ctx, tctx context.Context, tx Tx) error {
	cl.attempts++
	cl.answered, cl.found, cl.handlerFailed = nil, nil, false
	if !cl.skipRead || cl.attempts > 1 {
		if cl.found = cl.get(tctx, tx); cl.found != nil {
			return errAnswered
		}
	}
	a, herr := cl.runHandler(ctx, tctx, tx)
	cl.answered = a
	if herr != nil {
		cl.handlerFailed = true
		return herr
	}
	err := cl.createRecord(tctx, tx, a)
	if errors.Is(err, ErrExists) {
		// A call with this op id committed first. Answer its record;
		// a store that cannot read it here retries the transaction,
		// which then finds it.
		if cl.found = cl.get(tctx, tx); cl.found != nil {
			return errAnswered
		}
		return fmt.Errorf("%w: op record created concurrently", ErrConflict)
	}
	return err
}

// get reads the op record in the transaction: nil when there is none, or
// when it cannot be read (the transaction then fails on its own).
func (cl *call[In, Out]) get(ctx context.Context, tx Tx) *oprecord.Record {
	rec := new(oprecord.Record)
	if _, err := tx.Get(ctx, cl.key, rec); err != nil {
		return nil
	}
	return rec
}

// nullJSON is the result of a handler that returned none; never written to.
var nullJSON = json.RawMessage("null")

// createRecord creates the op record of answer a in tx.
func (cl *call[In, Out]) createRecord(ctx context.Context, tx Tx, a *answer) error {
	now := cl.c.now()
	resJSON := nullJSON
	if a.res != nil {
		var err error
		if resJSON, err = json.Marshal(a.res); err != nil {
			return fmt.Errorf("idem: encoding result: %w", err)
		}
	}
	fp, err := cl.fingerprint()
	if err != nil {
		return fmt.Errorf("idem: fingerprinting arguments: %w", err)
	}
	if cl.attempt = cl.firstAttempt; cl.attempts > 1 || cl.attempt == "" {
		cl.attempt = newAttemptID()
	}
	cl.rec = oprecord.Record{
		Scope: cl.scope, Tool: cl.tool, OpID: cl.opID, Fingerprint: fp, ArgsHash: cl.argsHash(),
		Result: resJSON, OutputText: a.text(),
		CommittedAt: now.UTC(), ExpiresAt: now.Add(cl.c.ttl).UTC(),
		Attempt: cl.attempt,
	}
	// The record and the options are the call's: no allocation for either.
	cl.recOpts = [2]backend.WriteOption{backend.WithExpiry(cl.rec.ExpiresAt), backend.CreateAtCommit()}
	return tx.Create(ctx, cl.key, &cl.rec, cl.recOpts[:]...)
}

const keyReusedMessage = "this op_id was already used with other arguments; mint a new op_id for a new operation"

// replay answers from a live op record: its result if the arguments match,
// key_reused if they do not. The one place a call is answered from a record.
func (cl *call[In, Out]) replay(ctx context.Context, rec *oprecord.Record, cause error) (*answer, *Error) {
	if !cl.sameArgs(rec) {
		cl.event(ctx, "key_reused", nil)
		cl.c.logger.LogAttrs(ctx, slog.LevelWarn, "idem: op id reused with other arguments", cl.attrs()...)
		return nil, newError(CodeKeyReused, keyReusedMessage)
	}
	res, err := decodeResult(rec)
	if err != nil {
		return nil, cl.internal(ctx, "this operation committed, but its stored answer cannot be given back; call get_operation for it, and do not send it again under a new op_id", err)
	}
	cl.t.recent.add(cl.key)
	cl.event(ctx, "replayed", cause)
	if cl.c.logger.Enabled(ctx, slog.LevelDebug) {
		cl.c.logger.LogAttrs(ctx, slog.LevelDebug, "idem: replayed stored result", cl.attrs()...)
	}
	cl.ans = answer{res: res, out: rec.StructuredOutput(), outText: rec.OutputText, replayed: true}
	return &cl.ans, nil
}

// sameArgs reports whether rec was stored for this call's arguments: their
// encoding byte for byte, or else the same canonical fingerprint.
func (cl *call[In, Out]) sameArgs(rec *oprecord.Record) bool {
	if rec.ArgsHash != "" && rec.ArgsHash == cl.argsHash() {
		if cl.fp == "" {
			cl.fp = rec.Fingerprint // for logs and events
		}
		return true
	}
	fp, err := cl.fingerprint()
	return err == nil && fp == rec.Fingerprint
}

// fingerprint returns the call's fingerprint (see fingerprintArgs),
// computed once.
func (cl *call[In, Out]) fingerprint() (string, error) {
	if cl.fp == "" && cl.fpErr == nil {
		cl.fp, cl.fpErr = fingerprintArgs(cl.inJSON)
	}
	return cl.fp, cl.fpErr
}

// prepareRecord computes, before the handler runs, the strings the op
// record holds beside what the call was given: the fingerprint, the hash of
// the arguments and the first attempt's id, in one string.
func (cl *call[In, Out]) prepareRecord() error {
	if cl.fp != "" || cl.hash != "" || cl.fpErr != nil { // one of them was needed before
		_, err := cl.fingerprint()
		return err
	}
	fp, err := fingerprintSum(cl.inJSON)
	if err != nil {
		cl.fpErr = err
		return err
	}
	args := sha256.Sum256(cl.inJSON)
	var buf [4*sha256.Size + maxAttemptIDLen]byte
	b := hex.AppendEncode(buf[:0], fp[:])
	b = hex.AppendEncode(b, args[:])
	s := string(appendAttemptID(b))
	const n = 2 * sha256.Size
	cl.fp, cl.hash, cl.firstAttempt = s[:n], s[n:2*n], s[2*n:]
	return nil
}

// argsHash returns the hex SHA-256 of the call's arguments as encoding/json
// wrote them, computed once.
func (cl *call[In, Out]) argsHash() string {
	if cl.hash == "" {
		cl.hash = oprecord.Hex(sha256.Sum256(cl.inJSON))
	}
	return cl.hash
}

// errRollback makes Store.Run roll back a transaction whose result is sent
// but not kept (IsError results and input requests).
var errRollback = errors.New("idem: roll back")

// runHandler calls the handler with a context that has the transaction's
// values and the request's cancellation. It returns errRollback, with the
// answer, for results that are answered but not kept, and the handler's
// error (wrapped in handlerError) otherwise.
func (cl *call[In, Out]) runHandler(reqCtx, tctx context.Context, tx Tx) (*answer, error) {
	var hctx context.Context
	switch {
	case tctx.Done() == nil && !cl.hctxUsed:
		// The usual case: the store's context is the detached request
		// context with values added, and the request's cancellation is
		// all the handler's context needs; nothing to allocate. (A later
		// attempt gets its own: the first one's may still be held.)
		cl.hctx, cl.hctxUsed = handlerContext{Context: tctx, req: reqCtx}, true
		hctx = &cl.hctx
	case tctx.Done() == nil:
		hctx = &handlerContext{Context: tctx, req: reqCtx}
	default:
		ctx, cancel := context.WithCancelCause(tctx)
		stop := context.AfterFunc(reqCtx, func() { cancel(context.Cause(reqCtx)) })
		defer func() {
			stop()
			cancel(nil)
		}()
		hctx = ctx
	}
	res, out, err := cl.callHandler(hctx, tx)
	if err != nil {
		return nil, &handlerError{err}
	}
	cl.output = out
	a := &cl.ans
	*a = answer{res: res}
	if res != nil && (res.IsError || res.InputRequests != nil) {
		return a, errRollback
	}
	if a.out, err = cl.encodeOutput(); err != nil {
		return nil, fmt.Errorf("idem: encoding output: %w", err)
	}
	return a, nil
}

// encodeOutput returns the structured content for the handler's output.
func (cl *call[In, Out]) encodeOutput() (json.RawMessage, error) {
	if cl.t.out.byPointer {
		return json.Marshal(&cl.output) // the call's copy: nothing to box
	}
	return cl.t.out.encode(cl.output)
}

// handlerContext is a handler's context when the store's context (the
// embedded Context) cannot be cancelled: its values, and the request's
// deadline and cancellation.
type handlerContext struct {
	context.Context
	req context.Context
}

func (c *handlerContext) Deadline() (time.Time, bool) { return c.req.Deadline() }
func (c *handlerContext) Done() <-chan struct{}       { return c.req.Done() }
func (c *handlerContext) Err() error                  { return c.req.Err() }

// Value looks in the store's context, then in the request's: the store's
// context holds every value of the request's but the one that links it to
// the request's cancellation, which context.Cause and the contexts a
// handler derives (context.WithCancel) find here.
func (c *handlerContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.req.Value(key)
}

// handlerError marks an error the handler returned (or its panic), so that
// it is answered as the handler's and not as the store's.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// callHandler turns a panic in the handler into an error.
func (cl *call[In, Out]) callHandler(ctx context.Context, tx Tx) (res *mcp.CallToolResult, out Out, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return cl.t.h(ctx, tx, cl.req, cl.in)
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("idem: tool handler panicked: %v", p.value) }

// finish answers a call the handler ran for: a, once committed (or rolled
// back on purpose), or the refusal err calls for.
func (cl *call[In, Out]) finish(ctx context.Context, a *answer, hooks *afterCommitList, err error) (*answer, *Error) {
	if cl.opID != "" && err == nil {
		cl.t.recent.add(cl.key)
	}
	switch {
	case err == nil:
		if hooks.pending() {
			hooks.run(context.WithoutCancel(ctx))
		}
		return a, nil
	case errors.Is(err, errRollback) && a != nil:
		return a, nil
	}
	return cl.failed(ctx, err, hooks)
}

// failed answers a call whose transaction failed with err: a refusal, or
// for a commit of unknown outcome what the op record says. (Apart from
// finish, so that the error variables are made only on this path.)
func (cl *call[In, Out]) failed(ctx context.Context, err error, hooks *afterCommitList) (*answer, *Error) {
	var he *handlerError
	var e *Error
	switch {
	case errors.As(err, &he):
		var p *panicError
		if errors.As(err, &p) {
			cl.logPanic(ctx, p)
			return nil, newError(CodeInternal, "the tool failed and nothing was saved; it is safe to retry")
		}
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, newError(CodeNotSaved, notSavedMessage(he.err))
	case errors.As(err, &e):
		return nil, e
	case errors.Is(err, ErrUnknownOutcome):
		return cl.unknown(ctx, err, hooks)
	case errors.Is(err, ErrConflict):
		return nil, &Error{Code: CodeContended, Message: "the change lost too many races with concurrent writes and was not saved; retry it", OpID: cl.opID}
	case errors.Is(err, ErrTooLarge):
		return nil, cl.internal(ctx, "the result is too large to store; nothing was saved", err)
	}
	return nil, cl.internal(ctx, "the change was not saved; it is safe to retry", err)
}

// notSavedMessage is the handler's own message, with what the code means.
func notSavedMessage(err error) string {
	msg := strings.TrimRight(strings.TrimSpace(err.Error()), ".")
	if msg == "" {
		return "The tool failed. Nothing was saved."
	}
	return msg + ". Nothing was saved."
}

// unknown handles a commit whose outcome is unknown: it looks the op record
// up once, and answers unknown_outcome if that does not settle it. If the
// record is there and this call's attempt wrote it, the commit landed and
// hooks, the committing attempt's, run; another call's record is answered
// as a replay (or key_reused), since the op record cannot be created twice.
func (cl *call[In, Out]) unknown(ctx context.Context, cause error, hooks *afterCommitList) (*answer, *Error) {
	if cl.opID != "" {
		rec, err := oprecord.Lookup(context.WithoutCancel(ctx), cl.t.s, cl.scope, cl.tool, cl.opID)
		if err == nil && cl.attempt != "" && rec.Attempt == cl.attempt && cl.sameArgs(rec) {
			if res, derr := decodeResult(rec); derr == nil {
				cl.t.recent.add(cl.key)
				hooks.run(context.WithoutCancel(ctx)) // our commit landed
				cl.ans = answer{res: res, out: rec.StructuredOutput(), outText: rec.OutputText}
				return &cl.ans, nil
			}
		}
		if err == nil {
			return cl.replay(ctx, rec, nil)
		}
		cl.t.recent.add(cl.key)
	}
	cl.event(ctx, "unknown_outcome", cause)
	cl.c.logger.LogAttrs(ctx, slog.LevelError, "idem: commit outcome unknown", append(cl.attrs(), slog.String("error", cause.Error()))...)
	msg := "the server cannot tell whether the change was saved; read the record before retrying"
	if cl.opID != "" {
		msg = "the server cannot tell whether the change was saved; call get_operation with this op_id before retrying"
	}
	return nil, &Error{Code: CodeUnknownOutcome, Message: msg, OpID: cl.opID}
}

func (cl *call[In, Out]) internal(ctx context.Context, msg string, err error) *Error {
	cl.c.logger.LogAttrs(ctx, slog.LevelError, "idem: "+msg, append(cl.attrs(), slog.String("error", err.Error()))...)
	return newError(CodeInternal, msg)
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

func (cl *call[In, Out]) event(ctx context.Context, kind string, err error) {
	if f := cl.c.observe; f != nil {
		f(ctx, Event{Kind: kind, Tool: cl.tool, Scope: cl.scope, OpID: cl.opID, Fingerprint: cl.fp, Err: err})
	}
}

// checkKeys refuses a call whose record-key arguments are absent, null or
// empty strings, or strings that are not valid UTF-8. Messages name the
// argument, never a value.
func checkKeys(args argMembers, keys []string) *Error {
	for _, k := range keys {
		raw, ok := args.get(k)
		if !ok || string(raw) == "null" || string(raw) == `""` {
			return newError(CodeMissingKey, fmt.Sprintf("argument %q is required: it names the record this call writes", k))
		}
		if !validUTF8String(raw) {
			return newError(CodeInvalidArguments, fmt.Sprintf("argument %q is not valid UTF-8: a record key must name one record", k))
		}
	}
	return nil
}

// validUTF8String reports whether raw, a valid JSON value, is not a string
// whose text is invalid UTF-8: bytes, or an escaped lone surrogate.
// Decoding writes U+FFFD for each, so that two different keys would name
// one record.
func validUTF8String(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return true
	}
	if !utf8.Valid(raw) {
		return false
	}
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a one-letter escape
			continue
		}
		r := hexRune(raw[i+2 : i+6])
		i += 5
		if utf16.IsSurrogate(r) {
			// Only a high surrogate followed by an escaped low one is a rune.
			if r >= 0xDC00 || i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			if lo := hexRune(raw[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

// hexRune returns the value of the four hex digits h.
func hexRune(h []byte) rune {
	n, _ := strconv.ParseUint(string(h), 16, 16)
	return rune(n)
}

// refusal turns an *Error into the tool result a caller sees.
func refusal(e *Error) *mcp.CallToolResult {
	meta := mcp.Meta{MetaError: string(e.Code)}
	text := e.Message
	if len(e.Candidates) > 0 {
		meta[metaCandidates] = e.Candidates
		b, _ := json.Marshal(e.Candidates)
		text += " Candidates: " + string(b)
	}
	if e.OpID != "" {
		meta[MetaOpID] = e.OpID
	}
	return &mcp.CallToolResult{
		Meta:    meta,
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
	}
}

// runTx is Store.Run with AfterCommit hooks, returning the hooks of the
// attempt that committed for the caller to run. Each attempt runs body with
// r's state.
//
// On ErrUnknownOutcome it returns the hooks of the last attempt too: that
// attempt's commit may have landed, and the caller runs them if a lookup
// confirms it did.
func runTx(ctx context.Context, s Store, r *txRun, body txBody) (*afterCommitList, error) {
	r.body = body
	err := s.Run(ctx, r.attempt)
	switch {
	case r.last == nil: // body never ran
		return nil, err
	case err == nil:
		return &r.last.hooks, nil
	case errors.Is(err, ErrUnknownOutcome):
		return &r.last.hooks, err
	}
	return nil, err
}

// A txBody is what each attempt of runTx's transaction runs.
type txBody interface {
	runAttempt(ctx context.Context, tx Tx) error
}

// txFunc is a function as a txBody.
type txFunc func(ctx context.Context, tx Tx) error

func (f txFunc) runAttempt(ctx context.Context, tx Tx) error { return f(ctx, tx) }

// txRun is the state of one runTx.
type txRun struct {
	body  txBody
	last  *hookContext // the latest attempt's
	first hookContext  // the first attempt's, kept here to save an allocation
}

// attempt is the fn of Store.Run: body, with a hook list of its own.
func (r *txRun) attempt(ctx context.Context, tx Tx) error {
	if r.last == nil {
		r.first = hookContext{Context: ctx}
		r.last = &r.first
	} else {
		r.last = &hookContext{Context: ctx}
	}
	return r.body.runAttempt(r.last, tx)
}

// flights lets one call per op key run at a time through one wrapped
// handler, so a concurrent duplicate waits for the first and then replays its
// result instead of running the handler too. Across handlers and processes
// the op record's create-if-absent in the store gives the same guarantee at
// the price of a retried transaction.
type flights struct {
	mu sync.Mutex // guards m and the done of every flight in it
	m  map[Key]*flight
}

// A flight is one call running under an op key.
type flight struct {
	done chan struct{} // closed when the call ends; made by the first call that waits
}

var errBusy = errors.New("idem: busy")

// acquire waits until no call with key k runs, then marks k running, as
// mine, until release(k, mine).
func (f *flights) acquire(ctx context.Context, k Key, wait time.Duration, mine *flight) error {
	var timeout <-chan time.Time // made on the first wait only
	for {
		f.mu.Lock()
		running, ok := f.m[k]
		if !ok {
			*mine = flight{}
			f.m[k] = mine
			f.mu.Unlock()
			return nil
		}
		if running.done == nil {
			running.done = make(chan struct{})
		}
		done := running.done
		f.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-done:
		case <-timeout:
			return errBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release ends the flight acquire started: the calls waiting for it go on.
func (f *flights) release(k Key, mine *flight) {
	f.mu.Lock()
	if f.m[k] == mine {
		delete(f.m, k)
	}
	done := mine.done
	f.mu.Unlock()
	if done != nil {
		close(done)
	}
}
