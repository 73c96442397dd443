package idem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// A Guard protects the tools of a server you already have: it is made once
// per server from the store and the server-wide settings, and its
// [Guard.Middleware] guards the tools you name, leaving their handlers and
// their registration as they are:
//
//	guard := idem.New(store, &idem.Options{TTL: 24 * time.Hour})
//	srv.AddReceivingMiddleware(guard.Middleware(idem.Tools{
//		"create_issue":      {idem.RequireOpID()},
//		"add_issue_comment": {idem.RecordKeys("owner", "repo", "issue_number", "body")},
//	}))
//
// A guarded tool's effect is taken to lie outside the store, as a call to
// a REST API or a write to the server's own database does: a call claims
// its operation in the store (a commit of its own) before the handler
// runs, no transaction is open while the handler runs, and the handler's
// answer, structured content included, replaces the claim and is replayed
// to every repeat. The handler finds the key to forward upstream with
// [IdempotencyKey], and says that a failure certainly did not happen with
// [NotDone]; any other failure leaves the outcome unknown, and a repeat is
// answered unknown_outcome until a [Reconcile] function settles it or the
// claim outlives the TTL.
//
// Everything a call needs lives in the store, not in the process: a Guard
// works for servers that build a new mcp.Server per request, and a repeat
// may reach another process. A Guard is safe for concurrent use; share one
// among all the servers that use the same store.
type Guard struct {
	s           Store
	c           *config // the server-wide settings
	lease       time.Duration
	httpEffects bool // Options.HTTPEffects
	fl          *flights
	// recent are the operations this Guard answered lately: a repeat of
	// one is read outside a transaction first, on stores that can, so a
	// replay takes no write transaction (on SQLite, no turn of its one
	// writer).
	recent *recentOps

	status *adapter.Wrapped // get_operation, as published

	mu   sync.Mutex            // guards defs
	defs map[defKey]*guardTool // the guarded tools as the server lists them
}

// Options are a [Guard]'s server-wide settings. The zero value of each field
// is its default.
type Options struct {
	// TTL is how long a claim or an answer is kept (default 24 hours): a
	// repeat after that runs again. With RecordKeys it is also how long an
	// identical call made on purpose is answered with the first one.
	TTL time.Duration
	// Lease bounds a handler's run (default 1 minute): its context ends a
	// tenth of the lease early, and a claim whose lease has passed without
	// an answer counts as abandoned (the process died), its outcome
	// unknown.
	Lease time.Duration
	// BusyAfter bounds how long a repeat waits for the call that holds the
	// claim before it is answered busy (default 30 seconds).
	BusyAfter time.Duration
	// Scope says who an operation belongs to; the default is the
	// authenticated user id of the request (req.Extra.TokenInfo.UserID),
	// or "" without one. Operations are looked up within a scope. A
	// server on mcp-go sets its scope in mcpgo.Options instead.
	Scope func(ctx context.Context, req *mcp.CallToolRequest) string
	// RequireScope refuses a call whose scope is "" with scope_required.
	RequireScope bool
	// Logger gets one record per call, when it is answered, with the tool,
	// the outcome ([Event.Outcome]), the code of a refusal, the scope, a
	// hash of the op id, the argument fingerprint and the duration; never
	// an argument value or the op id itself. Its level is Info for answers and for refusals the
	// caller can act on, Warn for key_reused, busy and contended, Error for
	// internal and unknown_outcome. A handler's panic adds a record with
	// its stack. The default discards.
	Logger *slog.Logger
	// Now is the clock of expiry and leases (default time.Now).
	Now func() time.Time
	// Tracer is told of every call as it arrives and as it is answered
	// (default: none). otelidem.NewTracer makes one for OpenTelemetry.
	Tracer Tracer
	// MaxStoredBytes bounds the bytes of the answers one scope keeps at
	// once (default 0: no bound): a call that would store an answer past it
	// is refused quota_exceeded, and nothing of it is saved; the message
	// says when older answers will have expired. A stored answer counts
	// until its record expires (TTL), plus at most a sixteenth of the TTL.
	// A replay is never refused. A guarded tool's call is refused before
	// its handler runs when its arguments, which its claim keeps until the
	// call is settled, would pass the bound; its answer, whose effect has
	// happened, is kept and counted whatever its size, so
	// the calls of a scope in progress at once can pass the bound by their
	// answers. Each call that stores an answer then also reads and writes
	// its scope's usage document, so a scope's calls at once take turns on
	// it.
	MaxStoredBytes int64
	// HTTPEffects says that the guarded tools' effects are HTTP requests
	// sent through [Transport], and nothing else: a failed call is then not
	// done when none of its requests can have acted (see Transport), and
	// unknown otherwise. Without it a failed call is unknown unless its
	// handler says [NotDone].
	HTTPEffects bool
}

// Tools names the tools a [Guard.Middleware] guards, each with the options
// that differ per tool: [RecordKeys], [OpID], [RequireOpID], [ForApps],
// [OnlyWhen] and [Reconcile]. A tool with none of the first three is guarded only when
// its client sends a stable id of the call (see docs/clients.md).
type Tools map[string][]Option

// New returns the Guard of a server whose operations are kept in s. It
// panics if s is nil or a duration in opts is negative: mistakes in the
// server's code.
func New(s Store, opts *Options) *Guard {
	if opts == nil {
		opts = &Options{}
	}
	var scope func(ctx context.Context, c *adapter.Call) string
	if f := opts.Scope; f != nil {
		scope = func(ctx context.Context, c *adapter.Call) string {
			req, ok := c.Request.(*mcp.CallToolRequest)
			if !ok {
				return c.User // another library's call: its adapter found the user
			}
			return f(ctx, req)
		}
	}
	return newGuard(s, opts, scope)
}

// newGuard is New with the scope as a function of an adapter.Call, for an
// adapter to another MCP library, which finds its own request in
// c.Request; nil for the default.
func newGuard(s Store, opts *Options, scope func(ctx context.Context, c *adapter.Call) string) *Guard {
	if s == nil {
		panic("idem: New needs a store")
	}
	c := defaultConfig()
	if opts.TTL < 0 || opts.BusyAfter < 0 || opts.Lease < 0 || opts.MaxStoredBytes < 0 {
		panic("idem: New: TTL, BusyAfter, Lease and MaxStoredBytes must not be negative")
	}
	if opts.TTL > 0 {
		c.ttl = opts.TTL
	}
	if opts.BusyAfter > 0 {
		c.busyAfter = opts.BusyAfter
	}
	if scope != nil {
		c.scope, c.customScope = scope, true
	}
	c.requireScope = opts.RequireScope
	if opts.Logger != nil {
		c.logger = opts.Logger
	}
	if opts.Now != nil {
		c.now = opts.Now
	}
	c.tracer = opts.Tracer
	c.quota = newQuota(opts.MaxStoredBytes, c.ttl)
	lease := time.Minute
	if opts.Lease > 0 {
		lease = opts.Lease
	}
	g := &Guard{s: s, c: c, lease: lease, httpEffects: opts.HTTPEffects, fl: &flights{m: make(map[Key]chan struct{})}, recent: newRecentOps(recentOpsSize),
		defs: make(map[defKey]*guardTool)}
	status, err := statusTool(g, decodeResult)
	if err != nil {
		panic(err.Error())
	}
	g.status = status
	return g
}

// A policy is how a Guard guards one tool: the server-wide settings with
// the tool's own options applied.
type policy struct {
	name string
	c    *config
}

// policies checks tools and returns their policies. It panics on an option
// that belongs to the server, or one given a value it cannot use.
func (g *Guard) policies(tools Tools) map[string]*policy {
	ps := make(map[string]*policy, len(tools))
	for name, opts := range tools {
		if name == "" || name == statusToolName {
			panic(fmt.Sprintf("idem: Middleware: %q cannot be guarded", name))
		}
		p := &policy{name: name, c: g.toolConfig(opts, true)}
		if p.c.err != nil {
			panic(fmt.Sprintf("idem: Middleware: tool %q: %v", name, p.c.err))
		}
		ps[name] = p
	}
	return ps
}

// toolConfig is the Guard's settings with a tool's options applied, for a
// tool it guards (outside) or one registered with AddTool on it.
func (g *Guard) toolConfig(opts []Option, outside bool) *config {
	return g.c.withTool(opts, outside)
}

// Run runs fn in a transaction of the Guard's store, and then the
// [AfterCommit] hooks fn registered in the attempt that committed. A Guard
// is the server's Store too: [AddTool], [Tool] and [RegisterStatusTool]
// given a Guard take its server-wide settings (TTL, scope, logger, clock,
// tracer), so that the tools, get_operation and the guarded tools cannot
// disagree.
func (g *Guard) Run(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	hooks, err := runTx(ctx, g.s, nil, fn)
	if err != nil {
		return err
	}
	hooks.run(context.WithoutCancel(ctx))
	return nil
}

// configFor is the configuration of a tool registered on s with opts, and
// the store it writes: a Guard's settings and store, or opts alone.
func configFor(s Store, opts []Option) (*config, Store) {
	if g, ok := s.(*Guard); ok {
		return g.toolConfig(opts, false), g.s
	}
	return defaultConfig().withTool(opts, false), s
}

// rawArgs is a guarded tool's handler as its checks see it: its arguments
// are kept as sent, and it is never called (the server's own handler is).
var rawArgs = adapter.Handler{
	In:  reflect.TypeFor[json.RawMessage](),
	Out: reflect.TypeFor[any](),
	Decode: func(args json.RawMessage) (any, error) {
		return slices.Clone(args), nil
	},
}

// A guardTool is a guarded tool as the server lists it: what to publish
// instead, and how its calls are checked.
type guardTool struct {
	p       *policy
	t       *tool // the checks and the published definition; its handler is never called
	ownOpID bool  // the server's own schema has an op_id property: it is passed on
}

// defKey names one definition of a tool: its name and a hash of how the
// server lists it.
type defKey struct {
	name string
	sum  [sha256.Size]byte
}

// guardTool returns the guarded form of def, the tool as the server lists
// it, made once per definition. It returns nil and an error when the
// server's definition cannot be guarded (a schema that cannot be read).
func (g *Guard) guardTool(p *policy, def adapter.ToolDef, raw []byte, decode func(json.RawMessage) (any, error)) (*guardTool, error) {
	k := defKey{name: def.Name, sum: sha256.Sum256(raw)}
	g.mu.Lock()
	gt, ok := g.defs[k]
	g.mu.Unlock()
	if ok {
		return gt, nil
	}
	_, ownOpID := schemaProperties(def.InputSchema)[opIDArgument]
	t, err := newTool(def, p.c, g.s, rawArgs, decode)
	if err != nil && def.Idempotent {
		// The server's own claim cannot stand with these options (an
		// optional op id and no keys): the hint says false.
		def.Idempotent = false
		t, err = newTool(def, p.c, g.s, rawArgs, decode)
	}
	if err != nil {
		return nil, err
	}
	gt = &guardTool{p: p, t: t, ownOpID: ownOpID}
	g.mu.Lock()
	if len(g.defs) >= maxGuardDefs {
		clear(g.defs) // a server that makes new definitions without end: start again
	}
	g.defs[k] = gt
	g.mu.Unlock()
	return gt, nil
}

// maxGuardDefs bounds the definitions a Guard keeps.
const maxGuardDefs = 4096

// schemaProperties returns the properties of an input schema in any form,
// nil when it has none.
func schemaProperties(schema any) map[string]json.RawMessage {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(b, &s)
	return s.Properties
}

// ErrNotDone marks an error after which the effect certainly did not
// happen: the API refused the request, or it was never sent. Wrap a
// handler's error with [NotDone].
var ErrNotDone = errors.New("idem: the effect did not happen")

// NotDone wraps err to say that the call's effect certainly did not happen,
// so that a guarded call's claim is released and a repeat runs again. A
// handler returns it as its error, or sets it on its error result
// (res.SetError(idem.NotDone(err))). Without it, a failed guarded call's
// outcome is unknown. NotDone(nil) is nil.
func NotDone(err error) error {
	if err == nil {
		return nil
	}
	return &notDoneError{err}
}

type notDoneError struct{ err error }

func (e *notDoneError) Error() string        { return e.err.Error() }
func (e *notDoneError) Unwrap() []error      { return []error{ErrNotDone, e.err} }
func (e *notDoneError) Is(target error) bool { return target == ErrNotDone }

// A Pending is a guarded call whose outcome is unknown: its claim ended
// without an answer (the handler failed in a way it did not say was
// [NotDone], or the process died). A [Reconcile] function is asked about
// it.
type Pending struct {
	Tool string
	// Arguments are the arguments of the call that claimed it, op_id
	// removed.
	Arguments json.RawMessage
	// Key is the key that call had to forward upstream ([IdempotencyKey]).
	Key       string
	ClaimedAt time.Time
}

// Reconcile sets how a guarded tool's unknown outcomes are settled. f is
// called, with no transaction open, inside a request of the caller that
// owns the operation (so with its credentials): a repeat of the call, or
// get_operation asking about it. f looks at the outside world (a search
// for the issue the call would have made, say) and returns:
//
//   - the result the call would have answered, when the effect happened:
//     it is stored as the call's answer and replayed;
//   - an error wrapping [ErrNotDone] ([NotDone]), when it certainly did not
//     happen: the claim is released, and a repeat runs the handler. Until
//     the claim's lease has ended this counts as "cannot tell": the call
//     may still be in flight upstream (a gateway answered 502 while the
//     API went on);
//   - any other error, or a nil result, when it cannot tell: the outcome
//     stays unknown.
func Reconcile(f func(ctx context.Context, req *mcp.CallToolRequest, p Pending) (*mcp.CallToolResult, error)) Option {
	if f == nil {
		return reconcileOption(nil)
	}
	return reconcileOption(func(ctx context.Context, c *adapter.Call, p Pending) (any, error) {
		req, _ := c.Request.(*mcp.CallToolRequest)
		res, err := f(ctx, req, p)
		if res == nil {
			return nil, err // no result: not a typed nil in an interface
		}
		return res, err
	})
}

// reconcileOption is [Reconcile] with the call as an adapter.Call: for
// adapters, whose reconcile options find their library's request in
// c.Request and return its result type.
func reconcileOption(f func(ctx context.Context, c *adapter.Call, p Pending) (any, error)) Option {
	return Option{apply: func(c *config) {
		if f == nil {
			c.invalid("Reconcile needs a function")
			return
		}
		c.reconcile = f
	}}
}

// OnlyWhen guards only the calls of a tool whose argument arg is one of
// values (a string, as sent), or, with no values, is sent at all (present,
// not null, not ""): a tool that does several things guards the one that
// creates (issue_write's "method" "create"), or the calls that carry what
// is created (a comment's "body", beside a reaction). Other calls run as
// without the guard. The record keys and a required op id are then
// required only of guarded calls, the description says which calls are
// guarded, and idempotentHint is the tool's own (not every call is
// guarded). OnlyWhen is for [Guard.Middleware]; [AddTool] refuses it.
func OnlyWhen(arg string, values ...string) Option {
	return Option{apply: func(c *config) {
		if arg == "" {
			c.invalid("OnlyWhen needs an argument name")
			return
		}
		c.onlyArg, c.onlyValues = arg, values
	}}
}

// guards reports whether a call with the argument members named is one
// the tool guards (see OnlyWhen).
func (c *config) guards(named argMembers) bool {
	if c.onlyArg == "" {
		return true
	}
	raw, ok := named.get(c.onlyArg)
	if !ok || string(raw) == "null" || string(raw) == `""` {
		return false
	}
	if len(c.onlyValues) == 0 {
		return true
	}
	v, isStr := stringOf(raw)
	return isStr && slices.Contains(c.onlyValues, v)
}

// onlyWhenPhrase says which calls OnlyWhen guards, for a description:
// ` when "method" is "create"`; "" without OnlyWhen.
func (c *config) onlyWhenPhrase() string {
	switch {
	case c.onlyArg == "":
		return ""
	case len(c.onlyValues) == 0:
		return fmt.Sprintf(" when %q is sent", c.onlyArg)
	}
	vals := quoteAll(c.onlyValues)
	or := strings.Join(vals, " or ")
	return fmt.Sprintf(" when %q is %s", c.onlyArg, or)
}

type idempotencyKeyKey struct{}

// IdempotencyKey returns the key a guarded call forwards upstream, for
// example as an Idempotency-Key header, and whether ctx is a guarded
// call's. The key is made from what identifies the operation (the scope,
// the tool, and the op id or the record keys' values), never from a
// JSON-RPC id or a session: every repeat of the operation, on any
// connection or process, gets the same key, and no other operation does.
// It is a UUID (version 8, RFC 9562), which APIs that want a UUID take.
//
// Send it only to an API that honours it. net/http takes a request with an
// Idempotency-Key header as safe to send again, and does so by itself when
// a kept-alive connection breaks before the answer: against an API that
// ignores the header, that is a second create under the guard. To send
// the key all the same, set the request's GetBody to nil, which stops
// net/http from sending it again.
func IdempotencyKey(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(idempotencyKeyKey{}).(string)
	return k, ok
}

// upstreamKey derives the key of (scope, tool, identity) for IdempotencyKey.
func upstreamKey(scope, tool, identity string) string {
	h := sha256.New()
	h.Write([]byte("idemkit upstream key\x00"))
	for _, s := range []string{scope, tool, identity} {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	x := hex.EncodeToString(u[:])
	return strings.Join([]string{x[:8], x[8:12], x[12:16], x[16:20], x[20:]}, "-")
}
