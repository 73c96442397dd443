package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/internal/adapter"
	"github.com/idemkit/sdk/internal/argsfp"
	"github.com/idemkit/sdk/internal/oprecord"
)

// This file is a Guard's call: claim the operation, run the handler with no
// transaction open, store its answer. The steps, in the order a call takes
// them:
//
//  1. newOutcall: the checks (op id, record keys, arguments), then what
//     identifies the operation: the op id, the record keys' values, or the
//     client's own id of the call. Without any, the call runs unguarded.
//  2. serveOp: one call per operation at a time in this process (flights);
//     then claim: the record is read, and created as a claim if absent, in
//     one transaction.
//  3. A claim of ours: runClaimed runs the handler and settles the claim:
//     done (the answer replaces it), released (NotDone), or unknown.
//  4. An answer: replayed (or key_reused for other arguments). A live claim
//     of another call: waited for. A claim that ended without an answer:
//     settled by reconcile, or answered unknown_outcome.

// An effect is how a guarded handler's call went.
type effect int

const (
	effectDone    effect = iota // it succeeded: its answer is stored
	effectNotDone               // it certainly did not happen: the claim is released
	effectUnknown               // it failed and may have happened
)

// A handlerReply is a guarded handler's answer: the adapter's Reply, or
// the library's protocol error.
type handlerReply struct {
	adapter.Reply
	err error
}

// effect is how the call that gave r went.
func (r *handlerReply) effect() effect {
	switch {
	case r.NotDone || r.Transient:
		return effectNotDone
	case r.err != nil || r.ErrorCode != "":
		return effectUnknown
	}
	return effectDone
}

// passed is the answer that passes r on.
func (r *handlerReply) passed() adapter.Answer {
	return adapter.Answer{Result: r.Result, Err: r.err, Passed: true}
}

// A runFunc calls the guarded handler with args: its reply, or a protocol
// error.
type runFunc func(ctx context.Context, args json.RawMessage) (adapter.Reply, error)

// An outcall is a guarded call on its way.
type outcall struct {
	gt       *guardTool
	c        *adapter.Call
	opID     string // as sent; "" for none
	ident    string // what identifies the operation; "" for nothing
	scope    string
	key      Key
	fp       string
	args     json.RawMessage // as the handler gets them
	upstream string          // IdempotencyKey's
	runner   runFunc         // calls the handler
}

// serve answers one call of a guarded tool.
func (g *Guard) serve(ctx context.Context, gt *guardTool, c *adapter.Call, run runFunc) adapter.Answer {
	start := time.Now()
	if g.c.tracer != nil {
		ctx = g.c.tracer.StartCall(ctx, CallInfo{Tool: c.Tool, SessionID: c.SessionID, ProtocolVersion: c.ProtocolVersion, Meta: c.Meta, Header: c.Header, Transport: c.Transport})
	}
	o, refused := g.newOutcall(ctx, gt, c)
	if o != nil {
		o.runner = run
	}
	var ga adapter.Answer
	switch {
	case refused != nil:
		ga = refusal(refused)
	case o.ident == "":
		var r handlerReply
		r.Reply, r.err = run(ctx, o.args) // nothing names the operation: the call is not guarded
		ga = r.passed()
	default:
		ga = g.serveOp(ctx, o)
	}
	g.report(ctx, c.Tool, o, ga, time.Since(start))
	return ga
}

// newOutcall checks a call and says what identifies its operation.
func (g *Guard) newOutcall(ctx context.Context, gt *guardTool, c *adapter.Call) (*outcall, *Error) {
	if gt.p.c.onlyArg != "" {
		if named, _ := parseArgs(c.Arguments); !gt.p.c.guards(named) {
			// A call the tool does not guard (OnlyWhen): as without the guard.
			args := c.Arguments
			if !gt.ownOpID {
				args = withoutOpID(args)
			}
			return &outcall{gt: gt, c: c, args: args}, nil
		}
	}
	opID, object, refused := gt.t.check(c)
	if refused != nil {
		return nil, refused
	}
	in, refused := gt.t.decode(c.Arguments, object)
	if refused != nil {
		return nil, refused
	}
	args := in.(json.RawMessage)
	cfg := gt.p.c
	if !gt.ownOpID {
		args = withoutOpID(args)
	}
	o := &outcall{gt: gt, c: c, opID: opID, args: args}
	switch {
	case opID != "":
		o.ident = opID
	case len(cfg.keys) > 0:
		fp, err := keysFingerprint(args, cfg.keys)
		if err != nil {
			return nil, newError(CodeInvalidArguments, "the record keys cannot be read")
		}
		// A space: no op id has one, so the two never name one record.
		o.ident = "keys " + fp
	default:
		if id, ok := c.Meta[claudeToolUseID].(string); ok && id != "" && len(id) <= maxOpIDLen {
			o.ident = "client " + id
		}
	}
	if o.ident == "" {
		if cfg.requireScope && cfg.scope(ctx, c) == "" {
			return nil, newError(CodeScopeRequired, "this tool needs an authenticated caller")
		}
		return o, nil
	}
	if o.scope, refused = cfg.opScope(ctx, c); refused != nil {
		return nil, refused
	}
	fp, err := argsfp.Of(args)
	if err != nil {
		return nil, newError(CodeInvalidArguments, "the arguments cannot be read")
	}
	o.fp = fp
	o.key = oprecord.Key(o.scope, c.Tool, o.ident)
	o.upstream = upstreamKey(o.scope, c.Tool, o.ident)
	return o, nil
}

// claudeToolUseID is the _meta member in which Claude Code sends its id of
// a tool call, the same on its own resend of the call.
const claudeToolUseID = "claudecode/toolUseId"

// withoutOpID returns args without a top-level op_id member.
func withoutOpID(args json.RawMessage) json.RawMessage {
	named, ok := parseArgs(args)
	if _, has := named.get(opIDArgument); !ok || !has {
		return args
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args
	}
	delete(m, opIDArgument)
	b, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return b
}

// keysFingerprint is the fingerprint of the record keys' values alone.
func keysFingerprint(args json.RawMessage, keys []string) (string, error) {
	named, _ := parseArgs(args)
	m := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		v, _ := named.get(k)
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return argsfp.Of(b)
}

// How a claim went.
type claimState int

const (
	claimOwned   claimState = iota // this call holds the claim
	claimDone                      // the operation's answer is stored
	claimHeld                      // another call holds a live claim
	claimUnknown                   // a claim ended without an answer
)

// stateOf is the state a record read at now is in.
func stateOf(rec *oprecord.Record, now time.Time) claimState {
	switch {
	case rec.State == "":
		return claimDone
	case rec.State == oprecord.Claimed && rec.LeaseUntil != nil && now.Before(*rec.LeaseUntil):
		return claimHeld
	}
	return claimUnknown
}

// serveOp answers a call whose operation is identified.
func (g *Guard) serveOp(ctx context.Context, o *outcall) adapter.Answer {
	ctx = backend.WithScope(ctx, o.scope) // a store's writer takes turns by scope
	cfg := o.gt.p.c
	release, _, err := g.fl.acquire(ctx, o.key, cfg.busyAfter)
	if errors.Is(err, errBusy) {
		return o.refuse(CodeBusy, "the same operation is still running; retry later with the same arguments")
	} else if err != nil {
		return o.refuse(CodeInternal, "the call was cancelled while it waited for the same operation; it did not run")
	}
	defer release()
	busyAt := time.Now().Add(cfg.busyAfter)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		st, rec, err := g.readOrClaim(ctx, o)
		if e := (*Error)(nil); errors.As(err, &e) {
			return o.refuse(e.Code, e.Message) // quota_exceeded
		}
		if err != nil {
			g.c.logger.LogAttrs(ctx, slog.LevelError, "idem: claim failed", slog.String("tool", o.c.Tool), slog.String("error", err.Error()))
			return o.refuse(CodeInternal, "the call was not run: the server could not record it; it is safe to retry")
		}
		if st != claimOwned && rec.Fingerprint != o.fp {
			return o.keyReused()
		}
		if st != claimHeld {
			g.recent.add(o.key)
		}
		switch st {
		case claimOwned:
			return g.runClaimed(ctx, o, rec)
		case claimDone:
			return o.replay(rec)
		case claimUnknown:
			ga, again := g.settleUnknown(ctx, o, rec)
			if !again {
				return ga
			}
			continue
		}
		// Another process holds the claim: wait for its answer.
		if time.Now().Add(wait).After(busyAt) {
			return o.refuse(CodeBusy, "the same operation is still running; retry later with the same arguments")
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return o.refuse(CodeInternal, "the call was cancelled while it waited for the same operation; it did not run")
		}
	}
}

// readOrClaim is claim, but for an operation this Guard answered lately:
// its record is read first outside a transaction, on stores that can, and
// claimed only when it is not there.
func (g *Guard) readOrClaim(ctx context.Context, o *outcall) (claimState, *oprecord.Record, error) {
	// Without this read a replay costs 1.14 (SQLite) and 1.32 (PostgreSQL)
	// times as much, a write transaction in place of a read; a first call
	// is not dearer (paired rounds of BenchmarkGuard).
	if r, ok := g.s.(backend.Reader); ok && g.recent.has(o.key) {
		if rec, _ := readRecord(context.WithoutCancel(ctx), r, o.key); rec != nil {
			return stateOf(rec, g.c.now()), rec, nil
		}
	}
	return g.claim(ctx, o)
}

// claim reads the operation's record and, when there is none, creates the
// claim, in one transaction. It returns the record read or created.
func (g *Guard) claim(ctx context.Context, o *outcall) (claimState, *oprecord.Record, error) {
	var st claimState
	var rec *oprecord.Record
	now := g.c.now()
	claim := o.claimRecord(now, g.c.ttl, g.lease)
	err := g.s.Run(context.WithoutCancel(ctx), func(ctx context.Context, tx Tx) error {
		rec = new(oprecord.Record)
		_, err := tx.Get(ctx, o.key, rec)
		if errors.Is(err, ErrNotFound) {
			if q := g.c.quota; q != nil {
				if err := q.charge(ctx, tx, o.scope, now, true, usageChange{int64(len(claim.Args)), claim.ExpiresAt}); err != nil {
					return err
				}
			}
			st, rec = claimOwned, claim
			err = tx.Create(ctx, o.key, claim, backend.WithExpiry(claim.ExpiresAt))
			if errors.Is(err, ErrExists) {
				return fmt.Errorf("%w: claimed concurrently", ErrConflict) // read it again
			}
			return err
		} else if err != nil {
			return err
		}
		st = stateOf(rec, now)
		return nil
	})
	if errors.Is(err, ErrUnknownOutcome) {
		// Whether the claim landed is told by its token.
		got, lerr := oprecord.Get(context.WithoutCancel(ctx), g.s, o.key)
		switch {
		case lerr == nil && got.Token == claim.Token && got.State == oprecord.Claimed:
			return claimOwned, got, nil
		case lerr == nil:
			return stateOf(got, now), got, nil
		}
	}
	return st, rec, err
}

// claimRecord is a new claim on o's operation.
func (o *outcall) claimRecord(now time.Time, ttl, lease time.Duration) *oprecord.Record {
	until := now.Add(lease).UTC()
	return &oprecord.Record{
		Scope: o.scope, Tool: o.c.Tool, OpID: o.ident, Fingerprint: o.fp, Result: json.RawMessage("null"),
		CommittedAt: now.UTC(), ExpiresAt: now.Add(ttl).UTC(),
		State: oprecord.Claimed, Token: newAttemptID(), LeaseUntil: &until, Args: o.args,
	}
}

// runClaimed runs the handler under claim (this call's) and settles the
// claim by how it went.
func (g *Guard) runClaimed(ctx context.Context, o *outcall, claim *oprecord.Record) adapter.Answer {
	// The handler runs to its end even when the client goes away, so that
	// its outcome is known; the lease bounds it.
	hctx := context.WithValue(context.WithoutCancel(ctx), idempotencyKeyKey{}, o.upstream)
	hctx, cancel := context.WithTimeout(hctx, g.lease-g.lease/10) // ends before the lease does
	var trace *effectTrace
	if g.httpEffects {
		hctx, trace = withEffectTrace(hctx)
	}
	r := o.run(hctx, g)
	cancel()
	if trace != nil && r.effect() == effectUnknown && !trace.mayHaveActed() {
		r.NotDone = true // no request of it can have acted (Options.HTTPEffects)
	}
	sctx := context.WithoutCancel(ctx)
	switch r.effect() {
	case effectDone:
		now := g.c.now()
		done, err := answerRecord(claim, r.Result, now, now.Add(g.c.ttl))
		if err == nil {
			err = g.settle(sctx, o.key, claim.Token, done)
		}
		if err != nil {
			// The effect happened: its answer goes out, and the claim,
			// left as it is, becomes an unknown outcome for repeats.
			g.c.logger.LogAttrs(ctx, slog.LevelError, "idem: the answer of a guarded call was not stored", slog.String("tool", o.c.Tool), slog.String("error", err.Error()))
		}
		return r.passed()
	case effectNotDone:
		if err := g.settle(sctx, o.key, claim.Token, nil); err != nil {
			g.c.logger.LogAttrs(ctx, slog.LevelError, "idem: the claim of a call that did not happen was not released", slog.String("tool", o.c.Tool), slog.String("error", err.Error()))
		}
		return r.passed()
	}
	unknown := *claim
	unknown.State = oprecord.Unknown // its lease kept: until it ends, the call may still be in flight upstream
	if err := g.settle(sctx, o.key, claim.Token, &unknown); err != nil {
		g.c.logger.LogAttrs(ctx, slog.LevelError, "idem: the unknown outcome of a guarded call was not recorded", slog.String("tool", o.c.Tool), slog.String("error", err.Error()))
	}
	ga := r.passed()
	if r.err == nil {
		ga.Meta = map[string]any{MetaError: string(CodeUnknownOutcome)}
		ga.Text = unknownOutcomeMessage
		if o.opID != "" {
			ga.Meta[MetaOpID] = o.opID
			ga.Text = unknownOutcomeOpIDMessage
		}
	}
	return ga
}

const (
	unknownOutcomeMessage     = "The server cannot tell whether this call took effect. Do not change the arguments to try again: a repeat with the same ones is answered with the first result once the server can tell, and refused with unknown_outcome until then."
	unknownOutcomeOpIDMessage = "The server cannot tell whether this call took effect: call get_operation with this op_id before you try again, and never resend it under a new op_id."
)

// run calls the handler, a panic in it an unknown outcome (it may have
// happened before the panic).
func (o *outcall) run(ctx context.Context, g *Guard) (r handlerReply) {
	defer func() {
		if p := recover(); p != nil {
			g.c.logger.LogAttrs(ctx, slog.LevelError, "idem: guarded tool handler panicked",
				slog.String("tool", o.c.Tool), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			r = handlerReply{err: &Error{Code: CodeUnknownOutcome, Message: "the tool failed, and the server cannot tell whether it took effect"}}
		}
	}()
	r.Reply, r.err = o.runner(ctx, o.args)
	return r
}

// answerRecord is the record of an operation's answer, result, in place
// of its claim: the claim's identity and fingerprint, committed at now.
func answerRecord(claim *oprecord.Record, result any, now, expires time.Time) (*oprecord.Record, error) {
	b, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("idem: encoding result: %w", err)
	}
	return &oprecord.Record{
		Scope: claim.Scope, Tool: claim.Tool, OpID: claim.OpID, Fingerprint: claim.Fingerprint, Result: b,
		CommittedAt: now.UTC(), ExpiresAt: expires.UTC(),
	}, nil
}

// errFenced: the claim a settle names is no longer the record's.
var errFenced = errors.New("idem: the claim was settled by another call")

// settle replaces the claim named token at k with next, or deletes it for a
// nil next, if it is still that claim: fenced on its token.
func (g *Guard) settle(ctx context.Context, k Key, token string, next *oprecord.Record) error {
	return g.s.Run(ctx, func(ctx context.Context, tx Tx) error {
		var rec oprecord.Record
		v, err := tx.Get(ctx, k, &rec)
		if err != nil {
			return err
		}
		if rec.State == "" || rec.Token != token {
			return errFenced
		}
		if q := g.c.quota; q != nil && (next == nil || next.State == "") {
			// The claim's arguments are no longer kept; the answer, once
			// the effect has happened, is, whatever the bound.
			changes := []usageChange{{-int64(len(rec.Args)), rec.ExpiresAt}}
			if next != nil {
				changes = append(changes, usageChange{int64(len(next.Result)), next.ExpiresAt})
			}
			if err := q.charge(ctx, tx, rec.Scope, g.c.now(), false, changes...); err != nil {
				return err
			}
		}
		if next == nil {
			return tx.Delete(ctx, k, v)
		}
		return tx.Update(ctx, k, v, next, backend.WithExpiry(next.ExpiresAt))
	})
}

// settleUnknown settles a claim that ended without an answer with the
// tool's reconcile function, or answers unknown_outcome. again says the
// record changed meanwhile: the call starts over.
func (g *Guard) settleUnknown(ctx context.Context, o *outcall, rec *oprecord.Record) (ga adapter.Answer, again bool) {
	res, done, ok := g.reconcile(ctx, o.gt.t.readResult, o.gt.p.c, o.c, o.key, rec, o.upstream)
	switch {
	case !ok:
		return o.refuse(CodeUnknownOutcome, o.unknownMessage()), false
	case done != nil:
		return adapter.Answer{Result: res, Meta: map[string]any{MetaReplayed: true}}, false
	}
	return adapter.Answer{}, true // released: claim again
}

// reconcile asks cfg's reconcile function about rec, an unknown outcome,
// and stores what it says. ok is false when it cannot tell (or there is
// none); done is the stored answer when the effect happened, res its
// result; both nil when it did not happen and the claim was released.
func (g *Guard) reconcile(ctx context.Context, decode func(json.RawMessage) (any, error), cfg *config, c *adapter.Call, k Key, rec *oprecord.Record, upstream string) (res any, done *oprecord.Record, ok bool) {
	if cfg.reconcile == nil {
		return nil, nil, false
	}
	p := Pending{Tool: rec.Tool, Arguments: rec.Args, Key: upstream, ClaimedAt: rec.CommittedAt}
	res, err := callReconcile(ctx, cfg, c, p)
	sctx := context.WithoutCancel(ctx)
	switch {
	case errors.Is(err, ErrNotDone) && rec.LeaseUntil != nil && g.c.now().Before(*rec.LeaseUntil):
		// Not there yet may be not there yet: within the claim's lease
		// the call may still be in flight upstream (behind a gateway that
		// answered 502, say), so only its lease's end makes it not done.
		return nil, nil, false
	case errors.Is(err, ErrNotDone):
		if err := g.settle(sctx, k, rec.Token, nil); err != nil && !errors.Is(err, errFenced) && !errors.Is(err, ErrNotFound) {
			return nil, nil, false
		}
		return nil, nil, true
	case err != nil || res == nil:
		return nil, nil, false
	}
	done, err = answerRecord(rec, res, g.c.now(), rec.ExpiresAt)
	if err != nil {
		return nil, nil, false
	}
	if err := g.settle(sctx, k, rec.Token, done); err != nil {
		// Settled by another call meanwhile: its record is the answer.
		got, rerr := oprecord.Get(context.WithoutCancel(ctx), g.s, k)
		if rerr != nil || got.State != "" {
			return nil, nil, false
		}
		done = got
	}
	res, err = decode(done.Result)
	if err != nil {
		return nil, nil, false
	}
	return res, done, true
}

// callReconcile calls cfg's reconcile function, a panic in it "cannot tell".
func callReconcile(ctx context.Context, cfg *config, c *adapter.Call, p Pending) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg.logger.LogAttrs(ctx, slog.LevelError, "idem: reconcile panicked", slog.String("tool", p.Tool), slog.Any("panic", r))
			res, err = nil, errors.New("idem: reconcile panicked")
		}
	}()
	return cfg.reconcile(ctx, c, p)
}

// replay answers a stored answer.
func (o *outcall) replay(rec *oprecord.Record) adapter.Answer {
	res, err := o.gt.t.readResult(rec.Result)
	if err != nil {
		return o.refuse(CodeInternal, "this operation took effect, but its stored answer cannot be given back; do not send it again")
	}
	return adapter.Answer{Result: res, Meta: map[string]any{MetaReplayed: true}}
}

func (o *outcall) keyReused() adapter.Answer {
	switch {
	case o.opID != "":
		return o.refuse(CodeKeyReused, keyReusedMessage)
	case len(o.gt.p.c.keys) > 0:
		return o.refuse(CodeKeyReused, fmt.Sprintf("a call with the same %s was made with other arguments, and its answer is kept for a while: resend the same arguments to get that answer, or change %s to make a new one",
			joinAnd(quoteAll(o.gt.p.c.keys)), joinAnd(quoteAll(o.gt.p.c.keys))))
	}
	return o.refuse(CodeKeyReused, "this call's id was already used with other arguments")
}

func (o *outcall) unknownMessage() string {
	if o.opID != "" {
		return "an earlier attempt of this operation ended without an answer, and the server cannot tell whether it took effect: call get_operation with this op_id later, and never resend it under a new op_id"
	}
	return "an earlier attempt of this call ended without an answer, and the server cannot tell whether it took effect: check whether it did before you try again"
}

// refuse is a refusal of o with code and msg, carrying the op id where
// the caller acts on it.
func (o *outcall) refuse(code Code, msg string) adapter.Answer {
	e := &Error{Code: code, Message: msg}
	if code == CodeBusy || code == CodeUnknownOutcome {
		e.OpID = o.opID
	}
	return refusal(e)
}

// report tells the logger and the tracer how a guarded call ended; o is
// nil for a call refused before its operation was identified.
func (g *Guard) report(ctx context.Context, tool string, o *outcall, ga adapter.Answer, d time.Duration) {
	code, _ := ga.Meta[MetaError].(string)
	e := Event{Code: Code(code), Replayed: ga.Meta[MetaReplayed] == true, Tool: tool, Duration: d}
	if o != nil {
		e.Scope, e.OpID, e.Fingerprint = o.scope, o.opID, o.fp
	}
	g.c.report(ctx, e)
}
