package idem

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// An Option is a setting of one tool, given to [AddTool], [Tool] or in
// [Tools]: what differs from tool to tool. What belongs to the server (the
// TTL, the scope, the logger, the clock, the tracer) is set once, in the
// [Options] given to [New]. Options are made only by the functions of this
// package. An option given a value it cannot use (an empty argument name,
// a nil function) makes the registration panic, as a tool whose schema is
// wrong does: it is a mistake in the server's code, and a default put in
// its place would hide it.
type Option struct {
	apply func(*config)
}

// invalid records the first mistake in the options; newTool and statusTool
// panic with it.
func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

type config struct {
	keys         []string
	opID         bool
	requireOpID  bool
	ttl          time.Duration
	scope        func(ctx context.Context, c *adapter.Call) string
	requireScope bool
	now          func() time.Time
	logger       *slog.Logger
	busyAfter    time.Duration
	readFirst    bool
	forApps      bool
	customScope  bool // Options.Scope was given
	tracer       Tracer
	quota        *quota // nil: no bound (Options.MaxStoredBytes)
	// outside: the tool is a Guard's, whose effect lies outside the
	// store; reconcile settles its unknown outcomes (Reconcile).
	outside   bool
	reconcile func(ctx context.Context, c *adapter.Call, p Pending) (any, error)
	// onlyArg, when set, guards only the calls whose argument onlyArg is
	// one of onlyValues, or, with none, is sent (OnlyWhen).
	onlyArg    string
	onlyValues []string

	err error // the first option given a value it cannot use
}

// defaultConfig is the server-wide settings of a zero [Options].
func defaultConfig() *config {
	return &config{
		ttl:       24 * time.Hour,
		scope:     defaultScope,
		now:       time.Now,
		logger:    slog.New(slog.DiscardHandler),
		busyAfter: 30 * time.Second,
	}
}

// withTool returns c, the server's settings, with a tool's options
// applied.
func (c config) withTool(opts []Option, outside bool) *config {
	c.keys, c.err = nil, nil
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&c)
		}
	}
	c.opID = c.opID || c.requireOpID
	c.outside = outside
	if c.forApps && (!c.requireOpID || len(c.keys) > 0) {
		c.invalid("ForApps is for a tool with RequireOpID and no RecordKeys")
	}
	return &c
}

// RecordKeys names the record-key arguments: the arguments that say which record
// the write touches (a session id, a slug, a handle, a date). They are
// required in the tool's input schema, and a call missing any of them, or
// sending an empty string or null, is refused with missing_key before the
// handler runs. The handler makes the write create-if-absent or
// replace-by-key on them, so every repeat of a call writes the same record
// and the tool says idempotentHint: true.
func RecordKeys(args ...string) Option {
	return Option{apply: func(c *config) {
		if len(args) == 0 || slices.Contains(args, "") {
			c.invalid("RecordKeys needs argument names, none empty")
		}
		c.keys = append(c.keys, args...)
	}}
}

// OpID accepts an optional op id minted by the caller before its first
// attempt, as the op_id argument or as _meta["io.idemkit/op_id"]. A call with
// an op id stores its result with the change; a later call with the same op
// id gets the stored result and nothing it does is kept. A call without one
// runs as if the option were absent.
//
// An optional op id does not make a tool idempotent: two identical calls
// without one run twice. A tool with OpID and no [RecordKeys] therefore says
// idempotentHint: false (clients that replay a lost call on that hint would
// otherwise write twice); use [RequireOpID] when every caller can mint one.
func OpID() Option { return Option{apply: func(c *config) { c.opID = true }} }

// RequireOpID is [OpID] with the op id required: the input schema lists
// op_id in required, its description tells the caller to mint one per
// intended operation and resend it on every retry, and a call without one is
// refused with invalid_op_id. Since every call then carries an op id, every
// repeat of the same arguments answers the stored result, and the tool says
// idempotentHint: true.
func RequireOpID() Option { return Option{apply: func(c *config) { c.requireOpID = true }} }

// ForApps declares a [RequireOpID] tool with no record key to be for app
// callers, which mint an op id once and resend it: a model that lost an
// answer may call again under a new op id, and such a tool would write
// twice. The description then starts with "For apps, not models.", and the
// tool's _meta says so under [MetaCallers] ("apps"), where `idem audit`
// reads it and reports the tool as information instead of warning that a
// model's retry is unsafe. Give models a keyed tool for the same write
// beside it. ForApps without RequireOpID, or with RecordKeys, makes the
// registration panic.
func ForApps() Option { return Option{apply: func(c *config) { c.forApps = true }} }

// ReadFirst makes every call with an op id read its op record before the
// transaction, on stores that can read outside one ([backend.Reader]). By
// default only op ids this handler answered lately are read first (a retry
// after a lost response usually comes back to the process that answered it);
// other calls skip that read and a duplicate answered elsewhere is caught by
// the op record's create at commit, at the price of a transaction that runs
// the handler and rolls back. Choose ReadFirst when repeats usually reach
// another process than the first call did.
func ReadFirst() Option { return Option{apply: func(c *config) { c.readFirst = true }} }

// An Event describes how a tool call ended, to the [Tracer]: what the
// middleware's log record says, with the op id itself.
type Event struct {
	// Code is the code the call was answered with: a refusal's, or the
	// handler's error result's; "" for an answer.
	Code Code
	// Replayed says the answer is a stored one, for a repeat.
	Replayed    bool
	Tool        string
	Scope       string
	OpID        string // "" for a call without one
	Fingerprint string // the arguments' fingerprint, when the call computed it
	// Attempts is how many times the store ran the call's transaction
	// (more than 1 after conflicts with concurrent writes); 0 when the
	// call was answered without one.
	Attempts int
	Waited   bool // the call waited for a concurrent call with the same op id
	Duration time.Duration
	Err      error // for unknown outcomes and internal errors: the store's error
}

// Outcome names how the call ended, as the middleware's log record, spans
// and metrics do:
//
//   - "replay": the answer is a stored one (Replayed); nothing the call did
//     was kept.
//   - "unknown": the store could not tell whether the commit landed (code
//     unknown_outcome).
//   - "refused": the answer is a tool error with a code: a refusal of the
//     middleware (invalid_arguments, key_reused, busy, ...), or the
//     handler's error or IsError result (not_saved, or the handler's own
//     code). Nothing the call did was kept.
//   - "first": the handler ran and its answer was sent, committed with the
//     handler's writes (and, with an op id, stored for repeats).
func (e Event) Outcome() string {
	switch {
	case e.Replayed:
		return "replay"
	case e.Code == CodeUnknownOutcome:
		return "unknown"
	case e.Code != "":
		return "refused"
	}
	return "first"
}

// opScope returns the scope of a call with an op id, or a refusal: with
// RequireScope and no scope; or, with the default scope (no Scope option),
// for a caller that is authenticated but whose user id the server does not know,
// since every such caller would share the empty scope and could replay
// another's result.
func (c *config) opScope(ctx context.Context, call *adapter.Call) (string, *Error) {
	scope := c.scope(ctx, call)
	switch {
	case scope != "":
		return scope, nil
	case c.requireScope:
		return "", newError(CodeScopeRequired, "this tool needs an authenticated caller")
	case !c.customScope && call.Authenticated:
		return "", newError(CodeScopeRequired, "the caller is authenticated but the server knows no user id for it, so its operations cannot be kept apart from other callers'; the server must say who its callers are (a token verifier that sets the user id, or a Scope)")
	}
	return "", nil
}

// defaultScope returns the authenticated user id of the call, or "" when
// there is none (stdio and in-memory transports).
func defaultScope(ctx context.Context, c *adapter.Call) string { return c.User }
