package exserve

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The reasons a request is refused before it reaches the MCP server, as
// the refusal log and the idemkit.http.refusals counter name them.
const (
	reasonUnauthorized  = "unauthorized"    // 401: no bearer token of a user
	reasonTimeout       = "timeout"         // 408: the body not received within -read-timeout
	reasonBodyTooLarge  = "body_too_large"  // 413: a body above -max-body
	reasonBodyUnread    = "body_unreadable" // 400: the body could not be read
	reasonBatchTooLarge = "batch_too_large" // 400: a batch above -max-batch, -max-calls or -max-calls-total
	reasonTooManyCalls  = "too_many_calls"  // 429: the user already has -max-calls requests waiting
	reasonMethodTooLong = "method_too_long" // 400: a JSON-RPC method longer than maxNameLen
	reasonNameTooLong   = "name_too_long"   // 400: a name in params longer than maxNameLen
)

// RefusalLogInterval is the least time between two log records of one
// reason and user: the refusals in between are counted, and the next
// record, at the end of the interval, says how many there were.
const RefusalLogInterval = 10 * time.Second

// refusals logs and counts the requests the serving layer refuses: one
// record per reason and user at most every interval, never quoting the
// request, and each refusal on the counter idemkit.http.refusals, by HTTP
// status and reason. Its state is one entry per reason and user refused in
// the last interval.
type refusals struct {
	log      *slog.Logger
	count    metric.Int64Counter
	interval time.Duration // between two records of one reason and user
	pause    time.Duration // RefusalPause, but in tests

	mu      sync.Mutex
	windows map[refusalKey]*refusalWindow // guarded by mu
}

type refusalKey struct{ user, reason string }

// refusalWindow is an interval since a record of one reason and user.
type refusalWindow struct {
	status     int
	suppressed int // refusals not logged since the record
}

// newRefusals logs on log and counts on a meter of mp (nil: the global
// meter provider, which [Telemetry] sets).
func newRefusals(log *slog.Logger, mp metric.MeterProvider, interval time.Duration) *refusals {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	// The only error is a name the API refuses; the counter is usable
	// whatever it says.
	c, _ := mp.Meter("github.com/idemkit/sdk/examples/internal/exserve").Int64Counter("idemkit.http.refusals",
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests the HTTP serving layer refused before they reached the MCP server, by status and reason."))
	return &refusals{log: log, count: c, interval: interval, pause: RefusalPause, windows: map[refusalKey]*refusalWindow{}}
}

// RefusalPause is how long a refused request is held before its answer
// (the Retry-After of a 429): a client that sends again as soon as it is
// refused then costs the server one request a second on each of its
// connections, not as many as it can send. A 408 is answered at once:
// net/http ends the request's context when the read times out.
const RefusalPause = time.Second

// refuse records a refusal (see record) and holds the request for
// rf.pause, or until its context ends; the caller then answers.
func (rf *refusals) refuse(ctx context.Context, user string, status int, reason string) {
	rf.record(ctx, user, status, reason)
	if rf.pause <= 0 {
		return
	}
	t := time.NewTimer(rf.pause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// record counts a refusal of a request of user's ("" before a user is
// known) with status for reason, and logs it unless a record of the same
// reason and user was written less than an interval ago.
func (rf *refusals) record(ctx context.Context, user string, status int, reason string) {
	rf.count.Add(ctx, 1, metric.WithAttributes(
		attribute.Int("http.response.status_code", status),
		attribute.String("idemkit.reason", reason)))
	k := refusalKey{user, reason}
	rf.mu.Lock()
	if w := rf.windows[k]; w != nil {
		w.suppressed++
		rf.mu.Unlock()
		return
	}
	rf.windows[k] = &refusalWindow{status: status}
	rf.mu.Unlock()
	rf.write(k, status, 0)
	time.AfterFunc(rf.interval, func() { rf.endWindow(k) })
}

// endWindow ends the interval of k: the refusals it suppressed, if any,
// get a record, which opens another interval.
func (rf *refusals) endWindow(k refusalKey) {
	rf.mu.Lock()
	w := rf.windows[k]
	if w.suppressed == 0 {
		delete(rf.windows, k)
		rf.mu.Unlock()
		return
	}
	n, status := w.suppressed, w.status
	w.suppressed = 0
	rf.mu.Unlock()
	rf.write(k, status, n)
	time.AfterFunc(rf.interval, func() { rf.endWindow(k) })
}

// write logs one record of k; suppressed is how many refusals went
// unlogged since the last.
func (rf *refusals) write(k refusalKey, status, suppressed int) {
	attrs := []slog.Attr{slog.String("reason", k.reason), slog.Int("status", status)}
	if k.user != "" {
		attrs = append(attrs, slog.String("user", k.user))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed), slog.Duration("within", rf.interval))
	}
	rf.log.LogAttrs(context.Background(), slog.LevelWarn, "request refused", attrs...)
}
