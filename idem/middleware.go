package idem

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/internal/adapter"
	"github.com/idemkit/sdk/internal/argsfp"
	"github.com/idemkit/sdk/internal/oprecord"
)

// tool is one wrapped handler: what it publishes, how its calls are checked,
// and the state its calls share.
type tool struct {
	def        adapter.ToolDef // as published
	c          *config
	s          Store
	h          adapter.Handler
	readResult func(json.RawMessage) (any, error) // a stored result, into the library's type
	// pre, when set, refuses a call before the checks, in the tool's own
	// words (get_operation's lookups).
	pre    func(ctx context.Context, c *adapter.Call) *Error
	in     *inputCheck
	out    output
	fl     *flights
	recent *recentOps
}

// output says how a handler's Out becomes structured content.
type output struct {
	isInterface bool        // Out is an interface type (any): no output schema, no content for nil
	elemZero    any         // for a pointer Out, the zero of its element, sent for a nil pointer
	check       *inputCheck // the output schema's check, with its defaults; nil for none
}

func outputOf(rt reflect.Type) output {
	o := output{isInterface: rt.Kind() == reflect.Interface}
	if rt.Kind() == reflect.Pointer {
		o.elemZero = reflect.Zero(rt.Elem()).Interface()
	}
	return o
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

// An answer is what a call sends back when it is not refused.
type answer struct {
	res      any             // the handler's result, or a fresh copy of the stored one; may be nil
	out      json.RawMessage // structured content, or nil
	code     Code            // for the handler's error result: its code
	replayed bool
}

// errorCode is the code of the handler's error result; "" for another
// answer, or none.
func (a *answer) errorCode() Code {
	if a == nil {
		return ""
	}
	return a.code
}

// call answers one tool call, or refuses it. The steps, each a function
// below, in the order a call takes them:
//
//  1. check: the op id and the record keys.
//  2. Without an op id, decode (the arguments against the input schema,
//     into the handler's In), then runPlain: the handler in a transaction;
//     its keyed writes make a repeat harmless.
//  3. With one, newOp: the caller's scope, the op record's key, and decode
//     unless the arguments are the same bytes as a repeat's answered lately;
//     then one call per op key at a time in this process (flights).
//  4. runOp: read the op record first when a repeat is likely; else run the
//     handler and create the op record in one transaction (transact); answer
//     a record found on the way as a replay (replay); settle a commit of
//     unknown outcome (unknown); answer the handler's result (finish).
func (t *tool) call(ctx context.Context, o *op, c *adapter.Call) (*answer, *Error) {
	if t.pre != nil {
		if refused := t.pre(ctx, c); refused != nil {
			return nil, refused
		}
	}
	opID, object, refused := t.check(c)
	if refused != nil {
		return nil, refused
	}
	if opID == "" {
		in, refused := t.decode(c.Arguments, object)
		if refused != nil {
			return nil, refused
		}
		if o.scope = t.c.scope(ctx, c); o.scope == "" && t.c.requireScope {
			return nil, newError(CodeScopeRequired, "this tool needs an authenticated caller")
		}
		return t.runPlain(ctx, o, c, in)
	}
	if refused := t.newOp(ctx, o, c, opID, object); refused != nil {
		return nil, refused
	}
	release, waited, err := t.fl.acquire(ctx, o.key, t.c.busyAfter)
	o.waited = waited
	if errors.Is(err, errBusy) {
		return nil, &Error{Code: CodeBusy, Message: "the same operation is still running; retry later with the same op_id", OpID: opID}
	} else if err != nil {
		return nil, newError(CodeInternal, "the call was cancelled while it waited for the same operation; nothing was saved by it")
	}
	defer release()
	return t.runOp(ctx, o, c)
}

// check refuses, before anything runs, a call whose op id or record keys are
// not well formed, or whose arguments are not a JSON object, in that order;
// decode then checks the rest of the arguments. The op id is "" when the
// call carries none; object says the arguments are a JSON object.
func (t *tool) check(c *adapter.Call) (opID string, object bool, refused *Error) {
	raw := c.Arguments
	// The op id and the keys are checked first, even when the rest of the
	// arguments fails the schema; named is empty for absent or null
	// arguments.
	named, object := parseArgs(raw)
	if !object && !absentArgs(raw) {
		if _, invalid := t.in.check(raw, false); invalid != nil {
			return "", false, invalid // not a JSON object, or not JSON at all
		}
	}
	switch {
	case t.c.opID:
		opID, refused = opIDOf(named, c.Meta)
	case len(t.c.keys) == 0 && !t.def.ReadOnly:
		// An op id in _meta on a tool that takes none as an argument, and
		// has no keys: the client asks for the call to be kept under it,
		// and will ask get_operation about it; ignoring it would make that
		// answer not_committed for a write that committed.
		opID, refused = opIDOf(nil, c.Meta)
	}
	if refused != nil {
		return "", object, refused
	}
	if t.c.requireOpID && opID == "" {
		return "", object, newError(CodeInvalidOpID, "this tool requires an op_id: mint one per operation before the first attempt and resend it on every retry")
	}
	return opID, object, checkKeys(named, t.c.keys)
}

// decode checks the arguments against the input schema and decodes them into
// the handler's In.
func (t *tool) decode(raw json.RawMessage, object bool) (any, *Error) {
	args, invalid := t.in.check(raw, object)
	if invalid != nil {
		return nil, invalid
	}
	in, err := t.h.Decode(args)
	if err != nil {
		// JSON Schema counts 1.0 as an integer, encoding/json does not.
		if whole, ok := wholeNumbersAsIntegers(args); ok {
			if v, werr := t.h.Decode(whole); werr == nil {
				in, err = v, nil
			}
		}
	}
	if err == nil {
		return in, nil
	}
	msg := "the arguments do not match the tool's input"
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// Only a property the schema names: deeper paths can hold the
		// caller's map keys.
		name, _, _ := strings.Cut(te.Field, ".")
		if _, ok := t.in.schema.Properties[name]; ok {
			msg = fmt.Sprintf("argument %q cannot be read as %s", name, te.Type)
		}
	}
	return nil, newError(CodeInvalidArguments, msg)
}

// An op is a tool call on its way through the middleware: its tool and,
// with an op id, what identifies the operation and what its op record holds
// beside the answer; and what its log record and metrics report.
type op struct {
	tool  string
	id    string // the op id; "" for a call without one
	scope string
	key   Key             // the op record's
	args  json.RawMessage // the arguments as sent
	in    any             // and as the handler gets them, once decoded
	fp    string          // fingerprint of args (package internal/argsfp), once computed
	fpErr error
	// object says args are a JSON object; decoded, that in is set (the
	// arguments passed the input schema).
	object, decoded bool

	attempts int   // transaction attempts
	waited   bool  // waited for a concurrent call with the same op id
	err      error // the store's error behind an internal or unknown answer
}

// newOp fills in o, a call with op id opID: its scope, the op record's key
// and its arguments, checked against the input schema (decode) unless they
// are the same bytes as a call of this op answered lately, which passed the
// same check then: a repeat then costs no decoding.
func (t *tool) newOp(ctx context.Context, o *op, c *adapter.Call, opID string, object bool) *Error {
	scope, scopeRefused := t.c.opScope(ctx, c)
	o.id, o.scope, o.args, o.object = opID, scope, c.Arguments, object
	o.key = oprecord.Key(scope, o.tool, opID)
	if o.fp = t.recent.fingerprint(o.key, o.args); o.fp == "" {
		if refused := o.decode(t); refused != nil {
			return refused
		}
	}
	return scopeRefused // after the arguments' refusals, as without an op id
}

// decode decodes o's arguments into o.in, once.
func (o *op) decode(t *tool) *Error {
	if o.decoded {
		return nil
	}
	in, refused := t.decode(o.args, o.object)
	o.in, o.decoded = in, refused == nil
	return refused
}

// fingerprint returns the op's fingerprint, computed once.
func (o *op) fingerprint() (string, error) {
	if o.fp == "" && o.fpErr == nil {
		o.fp, o.fpErr = argsfp.Of(o.args)
	}
	return o.fp, o.fpErr
}

// runPlain runs a call without an op id: the handler in a transaction.
//
// A read-only tool's (its annotations say readOnlyHint: true, as
// get_operation's do) runs in a read-only transaction on a store that has
// them ([backend.ReadOnlyRunner]): it reads a snapshot without waiting for
// the transactions that write, and a write through its Tx fails with an
// error wrapping [backend.ErrReadOnly], which the handler's error then
// answers with code not_saved, as any error it returns.
func (t *tool) runPlain(ctx context.Context, o *op, c *adapter.Call, in any) (*answer, *Error) {
	var a *answer
	run := t.s.Run
	if ro, ok := t.s.(backend.ReadOnlyRunner); ok && t.def.ReadOnly {
		run = ro.RunReadOnly
	}
	hooks, err := runTxIn(context.WithoutCancel(ctx), run, o, func(tctx context.Context, tx Tx) error {
		var err error
		a, err = t.runHandler(ctx, tctx, tx, c, in)
		return err
	})
	return t.finish(ctx, o, a, hooks, err)
}

// runOp runs a call with an op id. It answers from the op record when one is
// live (a replay, or key_reused for other arguments), and otherwise runs the
// handler and creates the op record in the same transaction.
func (t *tool) runOp(ctx context.Context, o *op, c *adapter.Call) (*answer, *Error) {
	// A repeat of an op id this handler answered lately is answered with
	// one read, on stores that can read outside a transaction. Otherwise
	// the op record's create at commit catches a duplicate, and the
	// transaction need not read it first.
	r, canRead := t.s.(backend.Reader)
	skipRead := canRead
	if canRead && (t.c.readFirst || t.recent.has(o.key)) {
		rec, err := readRecord(ctx, r, o.key)
		if rec != nil {
			return t.replay(ctx, o, rec)
		}
		skipRead = err == nil // on a failed read the transaction reads it itself
	}
	// The handler is about to run, on the decoded arguments, and its op
	// record will need the fingerprint: arguments that cannot be
	// fingerprinted are refused first.
	if refused := o.decode(t); refused != nil {
		return nil, refused
	}
	if _, err := o.fingerprint(); err != nil {
		return nil, t.internal(o, "fingerprinting arguments", err)
	}
	x := t.transact(ctx, o, c, skipRead)
	if x.found == nil && x.failedFirst {
		// The first attempt did not read the op record and failed in the
		// handler: perhaps on the writes of a duplicate that committed in
		// between, whose record then answers.
		if x.found, _ = readRecord(ctx, r, o.key); x.found != nil {
			var p *panicError
			if errors.As(x.err, &p) {
				t.logPanic(ctx, o, p) // answered from the record, but still a bug to see
			}
		}
	}
	switch {
	case x.found != nil:
		return t.replay(ctx, o, x.found)
	case errors.Is(x.err, ErrUnknownOutcome):
		return t.unknown(ctx, o, x.attempt, x.err, x.hooks)
	}
	return t.finish(ctx, o, x.answer, x.hooks, x.err)
}

// readRecord reads the op record outside a transaction: nil and nil when
// there is none.
func readRecord(ctx context.Context, r backend.Reader, k Key) (*oprecord.Record, error) {
	rec := new(oprecord.Record)
	_, err := r.Read(ctx, k, rec)
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, ErrNotFound):
		return nil, nil
	}
	return nil, err
}

// getRecord reads the op record in tx: nil when there is none, or when it
// cannot be read (the transaction then fails on its own).
func getRecord(ctx context.Context, tx Tx, k Key) *oprecord.Record {
	rec := new(oprecord.Record)
	if _, err := tx.Get(ctx, k, rec); err != nil {
		return nil
	}
	return rec
}

// What transact's transaction came to.
type txOutcome struct {
	answer *answer          // the handler's, when it ran and was not refused
	found  *oprecord.Record // an op record the transaction met: the call is a repeat
	hooks  *afterCommitList // the AfterCommit hooks of the attempt that committed
	err    error
	// attempt is the id the latest attempt wrote in the op record: after a
	// commit of unknown outcome, a record with it is this call's own.
	attempt string
	// failedFirst: the transaction's only attempt skipped reading the op
	// record and failed in the handler.
	failedFirst bool
}

// transact runs the handler and creates the op record in one transaction.
// Each attempt reads the op record first (but for a first attempt with
// skipRead) and answers from it when it is there.
func (t *tool) transact(ctx context.Context, o *op, c *adapter.Call, skipRead bool) txOutcome {
	var x txOutcome
	hooks, err := runTx(context.WithoutCancel(ctx), t.s, o, func(tctx context.Context, tx Tx) error {
		attempts := o.attempts
		x.answer, x.found, x.failedFirst = nil, nil, false
		if !skipRead || attempts > 1 {
			if x.found = getRecord(tctx, tx, o.key); x.found != nil {
				return errRollback
			}
		}
		a, err := t.runHandler(ctx, tctx, tx, c, o.in)
		x.answer = a
		if err != nil {
			x.failedFirst = skipRead && attempts == 1
			return err
		}
		x.attempt = newAttemptID()
		err = t.createRecord(tctx, tx, o, a, x.attempt)
		if errors.Is(err, ErrExists) {
			// A call with this op id committed first. Answer its record;
			// a store that cannot read it here retries the transaction,
			// which then finds it.
			if x.found = getRecord(tctx, tx, o.key); x.found != nil {
				return errRollback
			}
			return fmt.Errorf("%w: op record created concurrently", ErrConflict)
		}
		return err
	})
	switch {
	case x.found != nil && errors.Is(err, errRollback):
		x.answer, x.failedFirst = nil, false
	case errors.Is(err, errRollback) && x.answer != nil:
		// answered, not kept
	default:
		x.hooks, x.err = hooks, err
	}
	return x
}

// createRecord creates, in tx, the op record of answer a, written by the
// attempt with the given id.
func (t *tool) createRecord(ctx context.Context, tx Tx, o *op, a *answer, attempt string) error {
	resJSON := json.RawMessage("null")
	if a.res != nil {
		var err error
		if resJSON, err = json.Marshal(a.res); err != nil {
			return fmt.Errorf("idem: encoding result: %w", err)
		}
	}
	fp, err := o.fingerprint()
	if err != nil {
		return fmt.Errorf("idem: fingerprinting arguments: %w", err)
	}
	now := t.c.now()
	rec := &oprecord.Record{
		Scope: o.scope, Tool: o.tool, OpID: o.id, Fingerprint: fp,
		Result: resJSON, OutputText: string(a.out),
		CommittedAt: now.UTC(), ExpiresAt: now.Add(t.c.ttl).UTC(),
		Attempt: attempt,
	}
	if q := t.c.quota; q != nil {
		if err := q.charge(ctx, tx, o.scope, now, true, usageChange{int64(len(rec.Result) + len(rec.OutputText)), rec.ExpiresAt}); err != nil {
			return err
		}
	}
	return tx.Create(ctx, o.key, rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())
}

const keyReusedMessage = "this op_id was already used with other arguments: a retry resends the original arguments unchanged (or asks get_operation); only a new operation gets a new op_id"

// replay answers from a live op record: its result if the arguments match,
// key_reused if they do not. The one place a call is answered from a record.
func (t *tool) replay(ctx context.Context, o *op, rec *oprecord.Record) (*answer, *Error) {
	// Arguments not decoded are the same bytes as a call this handler
	// answered lately (newOp): their fingerprint is remembered. argsfp.Of
	// made 21 of a replay's 65 allocations and 17% of its CPU on SQLite
	// (BenchmarkMiddleware/sqlite/wrapped-replay, five paired rounds).
	remembered := !o.decoded
	if rec.ArgsHash != "" {
		if refused := o.decode(t); refused != nil {
			return nil, refused
		}
	}
	if !sameArgs(o, rec) {
		return nil, newError(CodeKeyReused, keyReusedMessage)
	}
	res, err := t.readResult(rec.Result)
	if err != nil {
		return nil, t.internal(o, "this operation committed, but its stored answer cannot be given back; call get_operation for it, and do not send it again under a new op_id", err)
	}
	if remembered {
		t.recent.add(o.key)
	} else {
		t.recent.remember(o.key, o.args, o.fp)
	}
	return &answer{res: res, out: rec.StructuredOutput(), replayed: true}, nil
}

// sameArgs reports whether rec was stored for o's arguments: the same
// fingerprint.
func sameArgs(o *op, rec *oprecord.Record) bool {
	fp, err := o.fingerprint()
	if err != nil {
		return false
	}
	if rec.ArgsHash != "" {
		// A record an earlier version wrote, within its TTL: it holds the
		// hash of the handler's decoded arguments as encoding/json wrote
		// them, which a repeat is compared by.
		b, err := json.Marshal(o.in)
		return err == nil && oprecord.Hex(sha256.Sum256(b)) == rec.ArgsHash
	}
	return fp == rec.Fingerprint
}

// errRollback makes Store.Run roll back a transaction whose result is sent
// but not kept (IsError results and input requests), or that met the op
// record.
var errRollback = errors.New("idem: roll back")

// runHandler calls the handler in tx. It returns errRollback, with the
// answer, for results that are answered but not kept, and the handler's
// error (wrapped in handlerError) otherwise.
func (t *tool) runHandler(reqCtx, tctx context.Context, tx Tx, c *adapter.Call, in any) (*answer, error) {
	hctx, cancel := handlerContext(reqCtx, tctx)
	defer cancel()
	reply, out, err := t.callHandler(hctx, tx, c, in)
	if err != nil {
		return nil, &handlerError{err}
	}
	a := &answer{res: reply.Result, code: Code(reply.ErrorCode)}
	if reply.ErrorCode != "" || reply.Transient {
		return a, errRollback
	}
	if a.out, err = t.out.encode(out); err != nil {
		return nil, fmt.Errorf("idem: encoding output: %w", err)
	}
	if t.out.check != nil && a.out != nil {
		checked, invalid := t.out.check.check(a.out, a.out[0] == '{')
		if invalid != nil {
			return nil, &outputError{invalid}
		}
		a.out = checked // with the schema's defaults, as the go-sdk sends them
	}
	return a, nil
}

// outputError is a handler's output that does not match the tool's
// output schema: a mistake in the server, not in the call.
type outputError struct{ e *Error }

func (e *outputError) Error() string {
	return "idem: the output does not match the output schema: " + e.e.Message
}

// handlerContext returns a handler's context: the store's context tctx
// (the request's values, detached from its cancellation, with the store's
// and the AfterCommit list added) given the request's deadline, and
// cancelled with the request's cause when the request is.
func handlerContext(req, tctx context.Context) (context.Context, func()) {
	if req.Done() == nil {
		// A request that cannot end adds nothing; and a context that
		// cannot be cancelled spares the store a watcher per statement
		// (database/sql's, SQLite's interrupt): 130 µs of CPU a first call
		// on SQLite (BenchmarkMiddleware/sqlite).
		return tctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(tctx)
	stop := context.AfterFunc(req, func() { cancel(context.Cause(req)) })
	if req.Err() != nil {
		cancel(context.Cause(req)) // at once, not from AfterFunc's goroutine
	}
	stopDeadline := func() {}
	if d, ok := req.Deadline(); ok {
		var c context.CancelFunc
		ctx, c = context.WithDeadline(ctx, d)
		stopDeadline = func() { c() }
	}
	return ctx, func() {
		stop()
		stopDeadline()
		cancel(nil)
	}
}

// handlerError marks an error the handler returned (or its panic), so that
// it is answered as the handler's and not as the store's.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// callHandler turns a panic in the handler into an error.
func (t *tool) callHandler(ctx context.Context, tx Tx, c *adapter.Call, in any) (reply adapter.Reply, out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return t.h.Call(ctx, tx, c, in)
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("idem: tool handler panicked: %v", p.value) }

// finish answers a call the handler ran for: a, once committed (or rolled
// back on purpose), or the refusal err calls for.
func (t *tool) finish(ctx context.Context, o *op, a *answer, hooks *afterCommitList, err error) (*answer, *Error) {
	if o.id != "" && err == nil {
		t.recent.remember(o.key, o.args, o.fp)
	}
	switch {
	case err == nil:
		hooks.run(context.WithoutCancel(ctx))
		return a, nil
	case errors.Is(err, errRollback) && a != nil:
		return a, nil
	}
	var he *handlerError
	var e *Error
	switch {
	case errors.As(err, &he):
		var p *panicError
		if errors.As(err, &p) {
			t.logPanic(ctx, o, p)
			return nil, newError(CodeInternal, "the tool failed and nothing was saved; it is safe to retry")
		}
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, newError(CodeNotSaved, notSavedMessage(he.err))
	case errors.As(err, &e):
		return nil, e
	case errors.Is(err, ErrUnknownOutcome):
		return t.unknown(ctx, o, "", err, hooks)
	case errors.Is(err, ErrConflict):
		return nil, &Error{Code: CodeContended, Message: "the change lost too many races with concurrent writes and was not saved; retry it", OpID: o.id}
	case errors.Is(err, ErrTooLarge):
		return nil, t.internal(o, "the result is too large to store; nothing was saved", err)
	case errors.As(err, new(*outputError)):
		return nil, t.internal(o, "the tool's answer does not match its output schema, so nothing was saved; the server logged it", err)
	}
	return nil, t.internal(o, "the change was not saved; it is safe to retry", err)
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
// record is there and attempt (the committing attempt's id) wrote it, the
// commit landed and hooks, that attempt's, run; another call's record is
// answered as a replay (or key_reused), since the op record cannot be
// created twice.
func (t *tool) unknown(ctx context.Context, o *op, attempt string, cause error, hooks *afterCommitList) (*answer, *Error) {
	if o.id != "" {
		rec, err := oprecord.Lookup(context.WithoutCancel(ctx), t.s, o.scope, o.tool, o.id)
		if err == nil && attempt != "" && rec.Attempt == attempt && sameArgs(o, rec) {
			if res, derr := t.readResult(rec.Result); derr == nil {
				t.recent.add(o.key)
				hooks.run(context.WithoutCancel(ctx)) // our commit landed
				return &answer{res: res, out: rec.StructuredOutput()}, nil
			}
		}
		if err == nil {
			return t.replay(ctx, o, rec)
		}
		t.recent.add(o.key)
	}
	o.err = cause
	msg := "the server cannot tell whether the change was saved; read the record before retrying"
	if o.id != "" {
		msg = "the server cannot tell whether the change was saved; call get_operation with this op_id before retrying"
	}
	return nil, &Error{Code: CodeUnknownOutcome, Message: msg, OpID: o.id}
}

// internal refuses a call with code internal and msg, keeping err for the
// call's log record.
func (t *tool) internal(o *op, msg string, err error) *Error {
	o.err = err
	return newError(CodeInternal, msg)
}

func (t *tool) logPanic(ctx context.Context, o *op, p *panicError) {
	t.c.logger.LogAttrs(ctx, slog.LevelError, "idem: tool handler panicked; rolled back",
		append(o.attrs(), slog.Any("panic", p.value), slog.String("stack", string(p.stack)))...)
}

func (o *op) attrs() []slog.Attr {
	a := []slog.Attr{slog.String("tool", o.tool)}
	if o.fp != "" {
		a = append(a, slog.String("fingerprint", o.fp))
	}
	return a
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
		r, _ := hex4(raw[i+2 : i+6])
		i += 5
		if utf16.IsSurrogate(r) {
			// Only a high surrogate followed by an escaped low one is a rune.
			if r >= 0xDC00 || i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			if lo, _ := hex4(raw[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

// runTx runs fn in a transaction of s with AfterCommit hooks: each attempt
// gets a list of its own in its context (o counts the attempts), and runTx
// returns the list of the
// attempt that committed, for the caller to run. On ErrUnknownOutcome it
// returns the last attempt's too: that attempt's commit may have landed,
// and the caller runs them if a lookup confirms it did.
func runTx(ctx context.Context, s Store, o *op, fn func(ctx context.Context, tx Tx) error) (*afterCommitList, error) {
	return runTxIn(ctx, s.Run, o, fn)
}

// runTxIn is runTx in the transactions of run: a store's Run or
// RunReadOnly.
func runTxIn(ctx context.Context, run func(context.Context, func(context.Context, Tx) error) error, o *op, fn func(ctx context.Context, tx Tx) error) (*afterCommitList, error) {
	var hooks *afterCommitList
	if o != nil {
		ctx = backend.WithScope(ctx, o.scope) // a store's writer takes turns by scope
	}
	err := run(ctx, func(ctx context.Context, tx Tx) error {
		if o != nil {
			o.attempts++
		}
		hooks = &afterCommitList{}
		return fn(context.WithValue(ctx, afterCommitKey{}, hooks), tx)
	})
	if err != nil && !errors.Is(err, ErrUnknownOutcome) {
		return nil, err
	}
	return hooks, err
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

// acquire waits until no call with key k runs, for at most wait, then marks
// k running until release is called. waited reports whether it had to wait.
func (f *flights) acquire(ctx context.Context, k Key, wait time.Duration) (release func(), waited bool, err error) {
	var timeout <-chan time.Time // made on the first wait: most calls never wait
	for {
		f.mu.Lock()
		running, ok := f.m[k]
		if !ok {
			done := make(chan struct{})
			f.m[k] = done
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.m, k)
				f.mu.Unlock()
				close(done)
			}, waited, nil
		}
		f.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			timeout = timer.C
		}
		waited = true
		select {
		case <-running:
		case <-timeout:
			return nil, waited, errBusy
		case <-ctx.Done():
			return nil, waited, ctx.Err()
		}
	}
}
