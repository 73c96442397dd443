package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/merge"
	"github.com/idemkit/sdk/otelidem"
)

// skew is the clock difference tolerated between a device and the server:
// a stop up to this much before its session's start is moved to the start.
const skew = time.Minute

// The collections the server writes, every document under its user (Owner).
const (
	colSessions   = "sessions"   // sessions/{session_id}: Session
	colRunning    = "running"    // running/{device}: the device's running slot
	colIndex      = "now"        // now/running: the running sessions, for get_now and targets
	colDays       = "days"       // days/{date}: what a day holds
	colLogs       = "logs"       // logs/{log_id}: LoggedTime
	colHeartbeats = "heartbeats" // heartbeats/{session_id}@{at}: Beat
	colLastStop   = "laststop"   // laststop/{device}: lastStop
)

// lastStop is the session a device stopped last, and when the server
// answered it: a repeat of that stop without a session id, from a device
// that runs nothing since, is answered that stop (retryWindow).
type lastStop struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// retryWindow is how long after a stop without a session id its repeat is
// answered that stop, rather than refused for want of a running session:
// a client's resend and a model's retry come within it.
const retryWindow = 10 * time.Minute

// slot is a device's running slot: created with create-if-absent by
// start_focus, so a device has at most one running session.
type slot struct {
	SessionID string `json:"session_id"`
}

// runningIndex lists a user's running sessions: at most maxRunning, each
// with a label of at most maxLabel characters, so that it stays under the
// stores' document limit.
type runningIndex struct {
	Sessions map[string]runningEntry `json:"sessions,omitempty"`
}

type runningEntry struct {
	Device string    `json:"device"`
	Label  string    `json:"label,omitempty"`
	Start  time.Time `json:"start"`
}

// day is what one date holds: the sessions started on it, the time logged
// by log_id, each device's step count (set_steps) and the steps apps added
// (add_steps). It holds ids, times and counts, never free text (a log's
// note is in its own document), and at most maxDaySessions sessions,
// maxDayLogs logs and maxDayDevices devices' counts, so that it stays
// under the stores' document limit.
type day struct {
	Sessions    map[string]bool   `json:"sessions,omitempty"`
	Logs        map[string]dayLog `json:"logs,omitempty"`
	Steps       int64             `json:"steps,omitempty"`
	DeviceSteps map[string]int64  `json:"device_steps,omitempty"`
}

// dayLog is a logged time as its day holds it, by log_id: what the overlap
// check and the day's minutes need.
type dayLog struct {
	StartedAt time.Time `json:"started_at"`
	Minutes   int       `json:"minutes"`
}

// end is when the logged time ended.
func (l dayLog) end() time.Time { return l.StartedAt.Add(time.Duration(l.Minutes) * time.Minute) }

// totalSteps is the day's steps: every device's count and what apps added.
func (d day) totalSteps() int64 {
	n := d.Steps
	for _, v := range d.DeviceSteps {
		n += v
	}
	return n
}

// LoggedTime is one log_session record.
type LoggedTime struct {
	LogID     string    `json:"log_id"`
	Date      string    `json:"date"`
	StartedAt time.Time `json:"started_at"`
	Minutes   int       `json:"minutes"`
	Note      string    `json:"note,omitempty"`
}

// end is when the logged time ended.
func (l LoggedTime) end() time.Time { return l.StartedAt.Add(time.Duration(l.Minutes) * time.Minute) }

// Beat is one heartbeat.
type Beat struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
	Note      string    `json:"note"`
}

// Config is how the server runs; the zero value is the defaults.
type Config struct {
	Now func() time.Time // the clock for event times (default time.Now)
	Log *slog.Logger     // where replays and refusals are logged (default: discard)
	TTL time.Duration    // how long an answer is kept and replayed (default 24 hours)
	// MaxStoredBytes bounds the bytes of answers one user keeps at once
	// (idem.Options.MaxStoredBytes; default 0: no bound).
	MaxStoredBytes int64
}

// focus is the server: its store, clock, and how many times each tool's
// handler ran and committed. It keeps nothing per connection: over
// stateless HTTP every request is a connection of its own.
type focus struct {
	store idem.Store
	now   func() time.Time

	ran       sync.Map // tool -> *atomic.Int64: handler runs, committed or not
	committed sync.Map // tool -> *atomic.Int64: handler runs that committed
}

// NewServer returns the focus server on store s.
func NewServer(s idem.Store, cfg Config) *mcp.Server {
	srv, _ := newFocus(s, cfg)
	return srv
}

func newFocus(s idem.Store, cfg Config) (*mcp.Server, *focus) {
	f := &focus{store: s, now: cfg.Now}
	if f.now == nil {
		f.now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The server's settings, once: every tool and get_operation take them.
	guard := idem.New(s, &idem.Options{TTL: cfg.TTL, MaxStoredBytes: cfg.MaxStoredBytes, Logger: log, Tracer: otelidem.NewTracer(nil)})
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-focus", Version: "v0.1.0"}, nil)
	// Every tool reads and writes this server's store alone, so each says
	// openWorldHint: false (MCP reads an absent one as true).
	no, yes := new(false), new(true)

	idem.AddTool(srv, &mcp.Tool{Name: "start_focus",
		Description: "Start a focus session on a device. A device has at most one running session: while one runs, " +
			"this answers that session instead of starting another, so a retry with the same device is safe. " +
			"Send session_id (an id your app mints) to make a retry name the same session; started_at is when the " +
			"user pressed start, for a queued request.",
		InputSchema: startSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no},
	}, guard, counted(f, "start_focus", f.startFocus), idem.RecordKeys("device"), idem.OpID())

	idem.AddTool(srv, &mcp.Tool{Name: "end_focus",
		Description: "Stop a focus session. Send session_id (from get_now or start_focus). Without it, the session " +
			"running on the device you send is stopped, and only when the call carries no op_id or end_at; otherwise " +
			"the answer lists the running sessions and their ids. One stop per device: a retry from the same device, " +
			"even with other values, keeps that device's earliest stop, and sent again without session_id within 10 " +
			"minutes, with nothing running on the device, it is answered that stop. Two devices may stop one session: " +
			"the earliest end wins, every device's stop is kept, done beats other outcomes, a differing later summary " +
			"goes to the notes. end_at is when the user pressed stop, for a queued request. The answer says what this " +
			"stop changed.",
		InputSchema: endSchema,
		// Destructive: an earlier stop shortens a session another device stopped.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes, OpenWorldHint: no},
	}, guard, counted(f, "end_focus", f.endFocus), idem.RecordKeys("device"), idem.OpID())

	idem.AddTool(srv, &mcp.Tool{Name: "delete_session",
		Description: "Delete a focus session. Send session_id; without it, the session running on the device you send " +
			"is deleted, otherwise the answer lists the running sessions and their ids. A repeat with the same " +
			"session_id (a retry, or deleting a deleted session) answers the same and deletes nothing.",
		// Idempotent by its own logic: a deleted session stays a tombstone
		// (a second delete answers the same), and without an id only the
		// session still running on the caller's device is a target.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes, IdempotentHint: true, OpenWorldHint: no},
	}, guard, counted(f, "delete_session", f.deleteSession))

	idem.AddTool(srv, &mcp.Tool{Name: "log_session",
		Description: "Log focus time done away from a device, replacing the earlier log with the same log_id. " +
			"started_at is when it started: logged times cannot overlap, so a log whose time overlaps another " +
			"log_id's is refused, naming that log. A retry after a lost answer is safe with the same log_id, and " +
			"refused, not counted twice, with a new one.",
		InputSchema: logSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes, OpenWorldHint: no},
	}, guard, counted(f, "log_session", f.logSession), idem.RecordKeys("log_id"))

	idem.AddTool(srv, &mcp.Tool{Name: "set_steps",
		Description: "Set a device's step count for a day: the total its step counter shows, replacing what that " +
			"device sent for that date before. device and date are the keys: a repeat, or a retry with a recounted " +
			"total, replaces the same count and never adds to it, so it is safe to send again after a lost answer. " +
			"The day's steps are the sum over devices.",
		InputSchema: setStepsSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes, OpenWorldHint: no},
	}, guard, counted(f, "set_steps", f.setSteps), idem.RecordKeys("device", "date"), idem.OpID())

	idem.AddTool(srv, &mcp.Tool{Name: "add_steps",
		Description: "Add steps to a day's total, for the phone app that queues step counts " +
			"offline. It mints op_id when the steps are counted and resends that op_id on every retry; a call with a " +
			"new op_id adds again. A model should call set_steps, whose keys are the device and the date.",
		InputSchema: addStepsSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no},
	}, guard, counted(f, "add_steps", f.addSteps), idem.RequireOpID(), idem.ForApps())

	idem.AddTool(srv, &mcp.Tool{Name: "heartbeat",
		Description: "Record a heartbeat with a note on a session. session_id and at are the keys: one heartbeat per " +
			"session and time, so a repeat answers the stored heartbeat and adds nothing.",
		InputSchema: beatSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no},
	}, guard, counted(f, "heartbeat", f.heartbeat), idem.RecordKeys("session_id", "at"))

	idem.AddTool(srv, &mcp.Tool{Name: "get_now",
		Description: "List the running focus sessions with their ids, and which of them runs on the device you send.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: no, OpenWorldHint: no},
	}, guard, counted(f, "get_now", f.getNow))

	idem.AddTool(srv, &mcp.Tool{Name: "list_sessions",
		Description: "List a day's focus sessions, logged time and steps (date as YYYY-MM-DD; default today, UTC).",
		InputSchema: listSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: no, OpenWorldHint: no},
	}, guard, counted(f, "list_sessions", f.listSessions))

	idem.RegisterStatusTool(srv, guard)
	return srv, f
}

// counted wraps h so that f counts its runs, and its commits after they
// happen.
func counted[In, Out any](f *focus, tool string, h idem.HandlerFor[In, Out]) idem.HandlerFor[In, Out] {
	ran, committed := new(atomic.Int64), new(atomic.Int64)
	f.ran.Store(tool, ran)
	f.committed.Store(tool, committed)
	return func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		ran.Add(1)
		idem.AfterCommit(ctx, func(context.Context) { committed.Add(1) })
		return h(ctx, tx, req, in)
	}
}

// Runs returns how many times tool's handler ran, and how many of those
// runs committed.
func (f *focus) Runs(tool string) (ran, committed int64) {
	if v, ok := f.ran.Load(tool); ok {
		ran = v.(*atomic.Int64).Load()
	}
	if v, ok := f.committed.Load(tool); ok {
		committed = v.(*atomic.Int64).Load()
	}
	return ran, committed
}

// key returns the key of a document of req's user: a call touches the
// records of its authenticated user, as for the op records' scope, or of
// "" over stdio.
func key(req *mcp.CallToolRequest, collection, id string) idem.Key {
	return idem.Key{Owner: exserve.CallUser(req), Collection: collection, ID: id}
}

// refuse is a refusal whose message is sent to the caller: it must hold no
// argument value.
func refuse(format string, args ...any) error {
	return &idem.Error{Code: idem.CodeNotSaved, Message: fmt.Sprintf(format, args...)}
}

// checkID refuses an id that cannot name a record.
func checkID(name, v string) error {
	if v == "" || len(v) > 128 || (idem.Key{Collection: "x", ID: v}).Validate() != nil {
		return refuse("%s must be 1..128 characters without '/' or control characters", name)
	}
	return nil
}

// parseTime reads an optional RFC 3339 argument; "" is the zero time.
func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, refuse("%s must be an RFC 3339 time such as 2026-03-02T14:05:00Z", name)
	}
	if t.Before(earliestEvent) || !t.Before(latestEvent) {
		// 0001-01-01 would read as "not sent" (now), and 9999-12-31 be
		// clamped to now: neither is what the caller meant.
		return time.Time{}, &idem.Error{Code: idem.CodeInvalidArguments,
			Message: fmt.Sprintf("%s is out of range: send a time in the years 2000 to 2099", name)}
	}
	return t.UTC(), nil
}

// checkText refuses a text argument longer than max characters. The
// input schemas state the same bound, so the middleware refuses such a
// call before the handler runs; this holds it for a call that reaches the
// handler another way.
func checkText(name, v string, max int) error {
	if utf8.RuneCountInString(v) > max {
		return &idem.Error{Code: idem.CodeInvalidArguments, Message: fmt.Sprintf("%s must be at most %d characters", name, max)}
	}
	return nil
}

// The most records a user's combined documents hold, so that each stays
// under the stores' document limit (DynamoDB's 400 KB is the smallest)
// with every id, label and text as long as allowed: at most about 135 KB
// for the running index, 165 KB for a day and 80 KB for a session
// (limits_test.go).
const (
	maxRunning     = 50  // sessions running at once: the running index
	maxDaySessions = 100 // sessions started on one date
	maxDayLogs     = 100 // logs of one date
	maxDayDevices  = 20  // devices' step counts on one date
	maxStops       = 10  // devices' stops of one session
)

// The range of event times a call may send.
var (
	earliestEvent = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	latestEvent   = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// The limits of the arguments, which the input schemas state and the
// handlers check.
const (
	maxLogMinutes  = 24 * 60 // log_session's minutes: 1 to a day
	maxAddSteps    = 100000  // add_steps's steps: 1 to this
	maxDeviceSteps = 200000  // set_steps's steps: 0 to this
	// maxLabel is the longest label of a session, and maxText the longest
	// summary or note, in characters (as a schema's maxLength counts).
	maxLabel = 200
	maxText  = 500
	// eventYears is an event time's year as written: 2000 to 2099, the
	// range parseTime holds the time to.
	eventYears = `^20[0-9]{2}-`
)

// The tools' input schemas: inferred from their arguments, with the
// limits the descriptions state (ranges, the outcomes of a stop, RFC 3339
// times and dates), so that a client reads them and the middleware
// refuses a value outside them (invalid_arguments) before the handler
// runs. The middleware does not check formats: parseTime and checkDate do.
var (
	startSchema = exserve.InputSchema[StartArgs](func(p props) {
		eventTime(p["started_at"])
		maxLength(p["label"], maxLabel)
	})
	endSchema = exserve.InputSchema[EndArgs](func(p props) {
		eventTime(p["end_at"])
		maxLength(p["summary"], maxText)
		for _, o := range outcomes {
			p["outcome"].Enum = append(p["outcome"].Enum, o)
		}
	})
	logSchema = exserve.InputSchema[LogArgs](func(p props) {
		eventTime(p["started_at"])
		between(p["minutes"], 1, maxLogMinutes)
		maxLength(p["note"], maxText)
	})
	addStepsSchema = exserve.InputSchema[StepsArgs](func(p props) {
		p["date"].Format = "date"
		between(p["steps"], 1, maxAddSteps)
	})
	setStepsSchema = exserve.InputSchema[SetStepsArgs](func(p props) {
		p["date"].Format = "date"
		between(p["steps"], 0, maxDeviceSteps)
	})
	beatSchema = exserve.InputSchema[BeatArgs](func(p props) {
		eventTime(p["at"])
		maxLength(p["note"], maxText)
	})
	listSchema = exserve.InputSchema[ListArgs](func(p props) { p["date"].Format = "date" })
)

// props are the properties of an input schema, by argument name.
type props = map[string]*jsonschema.Schema

// eventTime states that p is an event time: RFC 3339, in the years 2000
// to 2099.
func eventTime(p *jsonschema.Schema) {
	p.Format = "date-time"
	p.Pattern = eventYears
}

// maxLength states that the text p is at most n characters long.
func maxLength(p *jsonschema.Schema, n int) { p.MaxLength = &n }

// between states that p is from lo to hi.
func between(p *jsonschema.Schema, lo, hi float64) {
	p.Minimum, p.Maximum = &lo, &hi
}

func checkDate(v string) error {
	if _, err := time.Parse(time.DateOnly, v); err != nil {
		return refuse("date must be YYYY-MM-DD")
	}
	return nil
}

// get reads the document at k into a T; an absent one is the zero T at
// version 0.
func get[T any](ctx context.Context, tx idem.Tx, k idem.Key) (T, idem.Version, error) {
	var v T
	ver, err := tx.Get(ctx, k, &v)
	if errors.Is(err, idem.ErrNotFound) {
		return v, 0, nil
	}
	return v, ver, err
}

// save writes doc at k: created when it was absent (ver 0), else updated
// at the version read, so a concurrent writer makes the transaction retry.
func save(ctx context.Context, tx idem.Tx, k idem.Key, ver idem.Version, doc any) error {
	if ver == 0 {
		return tx.Create(ctx, k, doc)
	}
	return tx.Update(ctx, k, ver, doc)
}

// updateIndex applies change to the user's running index; an error from
// change is returned and nothing is written.
func updateIndex(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, change func(map[string]runningEntry) error) error {
	k := key(req, colIndex, "running")
	idx, ver, err := get[runningIndex](ctx, tx, k)
	if err != nil {
		return err
	}
	if idx.Sessions == nil {
		idx.Sessions = map[string]runningEntry{}
	}
	if err := change(idx.Sessions); err != nil {
		return err
	}
	return save(ctx, tx, k, ver, idx)
}

// updateDay applies change to the day at date; an error from change is
// returned and nothing is written.
func updateDay(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, date string, change func(*day) error) (day, error) {
	k := key(req, colDays, date)
	d, ver, err := get[day](ctx, tx, k)
	if err != nil {
		return d, err
	}
	if err := change(&d); err != nil {
		return d, err
	}
	return d, save(ctx, tx, k, ver, d)
}

// StartArgs are start_focus's arguments.
type StartArgs struct {
	Device    string `json:"device" jsonschema:"the device the session runs on, such as phone or laptop"`
	Label     string `json:"label" jsonschema:"what the session is for, up to 200 characters"`
	SessionID string `json:"session_id,omitempty" jsonschema:"an id for the new session, minted by your app; a retry with it names the same session"`
	StartedAt string `json:"started_at,omitempty" jsonschema:"when the user pressed start (RFC 3339), for a queued request; default now"`
}

// Started is start_focus's answer: the session running on the device.
type Started struct {
	SessionID string    `json:"session_id"`
	Device    string    `json:"device"`
	Label     string    `json:"label"`
	StartedAt time.Time `json:"started_at"`
	Message   string    `json:"message"`
}

func startedOf(s Session) Started {
	return Started{SessionID: s.ID, Device: s.Device, Label: s.Label, StartedAt: s.Start,
		Message: fmt.Sprintf("session %s on %s started at %s", s.ID, s.Device, s.Start.Format("15:04"))}
}

// startFocus creates the device's running slot if it is absent: a device
// whose slot is taken answers the session in it, so a retry without a
// session_id does not start a second one.
func (f *focus) startFocus(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in StartArgs) (*mcp.CallToolResult, Started, error) {
	if err := checkText("label", in.Label, maxLabel); err != nil {
		return nil, Started{}, err
	}
	if err := checkID("device", in.Device); err != nil {
		return nil, Started{}, err
	}
	if in.SessionID != "" {
		if err := checkID("session_id", in.SessionID); err != nil {
			return nil, Started{}, err
		}
	}
	at, err := parseTime("started_at", in.StartedAt)
	if err != nil {
		return nil, Started{}, err
	}
	start, err := target.EventTime(at, time.Time{}, f.now(), skew)
	if err != nil {
		return nil, Started{}, err
	}
	id := in.SessionID
	if id == "" {
		id = "s-" + rand.Text()[:10]
	} else if s, ver, err := get[Session](ctx, tx, key(req, colSessions, id)); err != nil {
		return nil, Started{}, err
	} else if ver != 0 {
		// This session was started before (and may have ended or been
		// deleted since): the same answer again, nothing started.
		return nil, startedOf(s), nil
	}

	slotKey := key(req, colRunning, in.Device)
	err = tx.Create(ctx, slotKey, slot{SessionID: id})
	if errors.Is(err, idem.ErrExists) {
		sl, _, err := get[slot](ctx, tx, slotKey)
		if err != nil {
			return nil, Started{}, err
		}
		running, _, err := get[Session](ctx, tx, key(req, colSessions, sl.SessionID))
		if err != nil {
			return nil, Started{}, err
		}
		if in.SessionID != "" {
			return nil, Started{}, refuse("device already runs session %s; end it before starting another", running.ID)
		}
		return nil, startedOf(running), nil
	}
	if err != nil {
		return nil, Started{}, err
	}
	s := Session{ID: id, Device: in.Device, Label: in.Label, Start: start}
	if err := tx.Create(ctx, key(req, colSessions, id), s); err != nil {
		return nil, Started{}, err
	}
	if err := updateIndex(ctx, tx, req, func(m map[string]runningEntry) error {
		if len(m) >= maxRunning {
			return refuse("%d sessions are running, the most one user may run at once: end one before starting another", maxRunning)
		}
		m[id] = runningEntry{Device: s.Device, Label: s.Label, Start: s.Start}
		return nil
	}); err != nil {
		return nil, Started{}, err
	}
	if _, err := updateDay(ctx, tx, req, start.Format(time.DateOnly), func(d *day) error {
		if len(d.Sessions) >= maxDaySessions {
			return refuse("%d sessions were started on this date, the most a day keeps: delete one, or log the time with log_session", maxDaySessions)
		}
		if d.Sessions == nil {
			d.Sessions = map[string]bool{}
		}
		d.Sessions[id] = true
		return nil
	}); err != nil {
		return nil, Started{}, err
	}
	return nil, startedOf(s), nil
}

// resolve returns the session a call names, or, when it names none and is
// not queued, the one running on the caller's device (target.Resolve).
// The owner is the device the call names, within the user's own records:
// never a connection, since over stateless HTTP every request is one.
func (f *focus) resolve(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, id, device string, queued bool) (string, error) {
	if id != "" {
		return id, checkID("session_id", id)
	}
	idx, _, err := get[runningIndex](ctx, tx, key(req, colIndex, "running"))
	if err != nil {
		return "", err
	}
	var owned, others []idem.Candidate
	for _, sid := range slices.Sorted(maps.Keys(idx.Sessions)) {
		e := idx.Sessions[sid]
		c := idem.Candidate{ID: sid, Label: e.Label + " on " + e.Device}
		if device != "" && e.Device == device {
			owned = append(owned, c)
		} else {
			others = append(others, c)
		}
	}
	return target.Resolve(target.Query{Owned: owned, Others: others, Queued: queued, Request: req})
}

// release frees the running slot and the index entry of a session that is
// no longer running.
func release(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, s Session) error {
	slotKey := key(req, colRunning, s.Device)
	sl, ver, err := get[slot](ctx, tx, slotKey)
	if err != nil {
		return err
	}
	if ver != 0 && sl.SessionID == s.ID {
		if err := tx.Delete(ctx, slotKey, ver); err != nil {
			return err
		}
	}
	return updateIndex(ctx, tx, req, func(m map[string]runningEntry) error {
		delete(m, s.ID)
		return nil
	})
}

// EndArgs are end_focus's arguments.
type EndArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to stop, from get_now or start_focus"`
	EndAt     string `json:"end_at,omitempty" jsonschema:"when the user pressed stop (RFC 3339), for a queued request; default now"`
	Summary   string `json:"summary,omitempty" jsonschema:"what was done, up to 500 characters"`
	Outcome   string `json:"outcome,omitempty" jsonschema:"done (default), abandoned or interrupted"`
	Device    string `json:"device" jsonschema:"the device sending the stop: without session_id, the session running on it is stopped"`
}

// Ended is end_focus's answer: the session after this stop, and what the
// stop changed.
type Ended struct {
	SessionID string    `json:"session_id"`
	End       time.Time `json:"end"`
	Outcome   string    `json:"outcome"`
	Summary   string    `json:"summary,omitempty"`
	Notes     []string  `json:"notes"`
	Stops     int       `json:"stops"`
	Result    string    `json:"result" jsonschema:"stopped, shortened or kept"`
	Message   string    `json:"message"`
}

// endFocus merges one stop into the session with the stop rule.
func (f *focus) endFocus(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in EndArgs) (*mcp.CallToolResult, Ended, error) {
	if err := checkText("summary", in.Summary, maxText); err != nil {
		return nil, Ended{}, err
	}
	if err := checkID("device", in.Device); err != nil {
		return nil, Ended{}, err
	}
	if in.Outcome == "" {
		in.Outcome = "done"
	} else if !slices.Contains(outcomes, in.Outcome) {
		return nil, Ended{}, refuse("outcome must be done, abandoned or interrupted")
	}
	at, err := parseTime("end_at", in.EndAt)
	if err != nil {
		return nil, Ended{}, err
	}
	id, err := f.resolve(ctx, tx, req, in.SessionID, in.Device, in.EndAt != "")
	if idem.CodeOf(err) == target.CodeAmbiguous && in.EndAt == "" && !target.Queued(req) {
		// Nothing runs on the device: a repeat of its last stop, within
		// the window, is answered that stop.
		if last, ver, lerr := get[lastStop](ctx, tx, key(req, colLastStop, in.Device)); lerr == nil && ver != 0 && f.now().Sub(last.At) < retryWindow {
			id, err = last.SessionID, nil
		}
	}
	if err != nil {
		return nil, Ended{}, err
	}
	k := key(req, colSessions, id)
	s, ver, err := get[Session](ctx, tx, k)
	if err != nil {
		return nil, Ended{}, err
	}
	if ver == 0 || s.Deleted {
		return nil, Ended{}, refuse("no session with that id: get_now lists the running ones")
	}
	end, err := target.EventTime(at, s.Start, f.now(), skew)
	if err != nil {
		return nil, Ended{}, err
	}
	// A stop is kept under its device, whatever op id it carries: a
	// device's repeat, even with a new op id or a reworded summary, is the
	// same stop, and the device's earliest stop stands (stopRule).
	stopKey := "device:" + in.Device
	if _, known := s.Stops[stopKey]; !known && len(s.Stops) >= maxStops {
		return nil, Ended{}, refuse("%d devices have stopped this session, the most it keeps: its end is set; send the stop from one of them", maxStops)
	}
	incoming := stopRequest(s, stopKey, Stop{At: end, Outcome: in.Outcome, Summary: in.Summary, Device: in.Device})
	ch, err := merge.Apply(ctx, tx, k, incoming, stopRule, nil)
	if err != nil {
		return nil, Ended{}, err
	}
	if s.Running() {
		if err := release(ctx, tx, req, ch.After); err != nil {
			return nil, Ended{}, err
		}
	}
	if in.SessionID == "" {
		if err := tx.Put(ctx, key(req, colLastStop, in.Device), lastStop{SessionID: s.ID, At: f.now()}); err != nil {
			return nil, Ended{}, err
		}
	}
	after := ch.After
	result, sentence := stopEffect(after, stopKey)
	return nil, Ended{SessionID: after.ID, End: *after.End, Outcome: after.Outcome, Summary: after.Summary,
		Notes: append([]string{}, after.Notes...), Stops: len(after.Stops), Result: result, Message: sentence}, nil
}

// DeleteArgs are delete_session's arguments.
type DeleteArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to delete, from get_now or list_sessions"`
	Device    string `json:"device,omitempty" jsonschema:"the device sending the delete: without session_id, the session running on it is deleted"`
}

// Deleted is delete_session's answer.
type Deleted struct {
	SessionID string `json:"session_id"`
	Deleted   bool   `json:"deleted"`
	Message   string `json:"message"`
}

// deleteSession leaves a tombstone, so a second delete of the same id
// answers the same and deletes nothing.
func (f *focus) deleteSession(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in DeleteArgs) (*mcp.CallToolResult, Deleted, error) {
	if in.Device != "" {
		if err := checkID("device", in.Device); err != nil {
			return nil, Deleted{}, err
		}
	}
	id, err := f.resolve(ctx, tx, req, in.SessionID, in.Device, false)
	if err != nil {
		return nil, Deleted{}, err
	}
	k := key(req, colSessions, id)
	s, ver, err := get[Session](ctx, tx, k)
	if err != nil {
		return nil, Deleted{}, err
	}
	if ver == 0 {
		return nil, Deleted{}, refuse("no session with that id: list_sessions lists a day's sessions")
	}
	answer := Deleted{SessionID: id, Deleted: true, Message: "session " + id + " is deleted"}
	if s.Deleted {
		return nil, answer, nil
	}
	wasRunning := s.Running()
	s.Deleted = true
	if err := tx.Update(ctx, k, ver, s); err != nil {
		return nil, Deleted{}, err
	}
	if wasRunning {
		if err := release(ctx, tx, req, s); err != nil {
			return nil, Deleted{}, err
		}
	}
	if _, err := updateDay(ctx, tx, req, s.Start.Format(time.DateOnly), func(d *day) error {
		delete(d.Sessions, id)
		return nil
	}); err != nil {
		return nil, Deleted{}, err
	}
	return nil, answer, nil
}

// LogArgs are log_session's arguments.
type LogArgs struct {
	LogID     string `json:"log_id" jsonschema:"the id of what is logged; logging it again replaces it"`
	StartedAt string `json:"started_at" jsonschema:"when the focus time started (RFC 3339); its date is the day it counts for"`
	Minutes   int    `json:"minutes" jsonschema:"minutes of focus, 1 to 1440"`
	Note      string `json:"note,omitempty" jsonschema:"what it was, up to 500 characters"`
}

// Logged is log_session's answer.
type Logged struct {
	LoggedTime
	DayMinutes int `json:"day_minutes"`
}

// logSession replaces the log at log_id, and the day's entry for it. A
// log whose time overlaps another log_id's is refused: one stretch of time
// is logged once, so a model's retry under a new log_id counts nothing.
func (f *focus) logSession(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in LogArgs) (*mcp.CallToolResult, Logged, error) {
	if err := checkText("note", in.Note, maxText); err != nil {
		return nil, Logged{}, err
	}
	if err := checkID("log_id", in.LogID); err != nil {
		return nil, Logged{}, err
	}
	if in.StartedAt == "" {
		return nil, Logged{}, refuse("started_at is required: when the focus time started, as RFC 3339")
	}
	start, err := parseTime("started_at", in.StartedAt)
	if err != nil {
		return nil, Logged{}, err
	}
	if in.Minutes < 1 || in.Minutes > maxLogMinutes {
		return nil, Logged{}, refuse("minutes must be 1 to %d", maxLogMinutes)
	}
	lt := LoggedTime{LogID: in.LogID, Date: start.Format(time.DateOnly), StartedAt: start, Minutes: in.Minutes, Note: in.Note}
	// A log that overlaps this one starts on its day or the day before
	// (a log lasts at most a day).
	for _, date := range []string{start.AddDate(0, 0, -1).Format(time.DateOnly), lt.Date} {
		d, _, err := get[day](ctx, tx, key(req, colDays, date))
		if err != nil {
			return nil, Logged{}, err
		}
		for _, id := range slices.Sorted(maps.Keys(d.Logs)) {
			o := d.Logs[id]
			if id != in.LogID && o.StartedAt.Before(lt.end()) && lt.StartedAt.Before(o.end()) {
				return nil, Logged{}, refuse("this time overlaps log %s (started %s, %d min), which is already logged; "+
					"to change that log, send its log_id", id, o.StartedAt.Format(time.RFC3339), o.Minutes)
			}
		}
	}
	k := key(req, colLogs, in.LogID)
	old, ver, err := get[LoggedTime](ctx, tx, k)
	if err != nil {
		return nil, Logged{}, err
	}
	if ver != 0 && old.Date != lt.Date {
		// The entry moved to another day: it leaves the old one.
		if _, err := updateDay(ctx, tx, req, old.Date, func(d *day) error {
			delete(d.Logs, in.LogID)
			return nil
		}); err != nil {
			return nil, Logged{}, err
		}
	}
	if err := tx.Put(ctx, k, lt); err != nil {
		return nil, Logged{}, err
	}
	d, err := updateDay(ctx, tx, req, lt.Date, func(d *day) error {
		if _, known := d.Logs[in.LogID]; !known && len(d.Logs) >= maxDayLogs {
			return refuse("%d logs are kept for this date, the most a day keeps: to change one, send its log_id", maxDayLogs)
		}
		if d.Logs == nil {
			d.Logs = map[string]dayLog{}
		}
		d.Logs[in.LogID] = dayLog{StartedAt: lt.StartedAt, Minutes: lt.Minutes}
		return nil
	})
	if err != nil {
		return nil, Logged{}, err
	}
	return nil, Logged{LoggedTime: lt, DayMinutes: d.loggedMinutes()}, nil
}

func (d day) loggedMinutes() int {
	n := 0
	for _, l := range d.Logs {
		n += l.Minutes
	}
	return n
}

// StepsArgs are add_steps's arguments (op_id is added by the middleware).
type StepsArgs struct {
	Date  string `json:"date" jsonschema:"the day, as YYYY-MM-DD"`
	Steps int64  `json:"steps" jsonschema:"steps to add, 1 to 100000"`
}

// StepsAdded is add_steps's answer.
type StepsAdded struct {
	Date     string `json:"date"`
	Added    int64  `json:"added"`
	DaySteps int64  `json:"day_steps"`
}

// addSteps adds to the day's total: an append, made safe for an app by the
// op id the middleware requires and stores with the change. A model that
// mints a new op id for its retry adds again, so models get set_steps.
func (f *focus) addSteps(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in StepsArgs) (*mcp.CallToolResult, StepsAdded, error) {
	if err := checkDate(in.Date); err != nil {
		return nil, StepsAdded{}, err
	}
	if in.Steps < 1 || in.Steps > maxAddSteps {
		return nil, StepsAdded{}, refuse("steps must be 1 to %d", maxAddSteps)
	}
	d, err := updateDay(ctx, tx, req, in.Date, func(d *day) error {
		d.Steps += in.Steps
		return nil
	})
	if err != nil {
		return nil, StepsAdded{}, err
	}
	return nil, StepsAdded{Date: in.Date, Added: in.Steps, DaySteps: d.totalSteps()}, nil
}

// SetStepsArgs are set_steps's arguments.
type SetStepsArgs struct {
	Device string `json:"device" jsonschema:"the device whose step counter this is, such as phone or watch"`
	Date   string `json:"date" jsonschema:"the day, as YYYY-MM-DD"`
	Steps  int64  `json:"steps" jsonschema:"the device's total for the day, 0 to 200000"`
}

// StepsSet is set_steps's answer.
type StepsSet struct {
	Device   string `json:"device"`
	Date     string `json:"date"`
	Steps    int64  `json:"steps" jsonschema:"the device's count for the day, as set"`
	DaySteps int64  `json:"day_steps" jsonschema:"the day's steps over every device"`
}

// setSteps replaces the device's count for the day: keyed by (device,
// date), so any repeat lands on the same count.
func (f *focus) setSteps(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in SetStepsArgs) (*mcp.CallToolResult, StepsSet, error) {
	if err := checkID("device", in.Device); err != nil {
		return nil, StepsSet{}, err
	}
	if err := checkDate(in.Date); err != nil {
		return nil, StepsSet{}, err
	}
	if in.Steps < 0 || in.Steps > maxDeviceSteps {
		return nil, StepsSet{}, refuse("steps must be 0 to %d", maxDeviceSteps)
	}
	d, err := updateDay(ctx, tx, req, in.Date, func(d *day) error {
		if _, known := d.DeviceSteps[in.Device]; !known && len(d.DeviceSteps) >= maxDayDevices {
			return refuse("%d devices have step counts for this date, the most a day keeps: send the count of one of them", maxDayDevices)
		}
		if d.DeviceSteps == nil {
			d.DeviceSteps = map[string]int64{}
		}
		d.DeviceSteps[in.Device] = in.Steps
		return nil
	})
	if err != nil {
		return nil, StepsSet{}, err
	}
	return nil, StepsSet{Device: in.Device, Date: in.Date, Steps: in.Steps, DaySteps: d.totalSteps()}, nil
}

// BeatArgs are heartbeat's arguments.
type BeatArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session, from start_focus or get_now"`
	At        string `json:"at" jsonschema:"when the heartbeat was taken (RFC 3339)"`
	Note      string `json:"note" jsonschema:"what is going on, up to 500 characters"`
}

// heartbeat creates the heartbeat at (session_id, at) if it is absent; a
// repeat answers the stored one and counts nothing.
func (f *focus) heartbeat(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in BeatArgs) (*mcp.CallToolResult, Beat, error) {
	if err := checkText("note", in.Note, maxText); err != nil {
		return nil, Beat{}, err
	}
	if err := checkID("session_id", in.SessionID); err != nil {
		return nil, Beat{}, err
	}
	at, err := parseTime("at", in.At)
	if err != nil {
		return nil, Beat{}, err
	}
	sk := key(req, colSessions, in.SessionID)
	s, ver, err := get[Session](ctx, tx, sk)
	if err != nil {
		return nil, Beat{}, err
	}
	if ver == 0 || s.Deleted {
		return nil, Beat{}, refuse("no session with that id: get_now lists the running ones")
	}
	if _, err := target.EventTime(at, s.Start, f.now(), skew); err != nil {
		return nil, Beat{}, err
	}
	bk := key(req, colHeartbeats, in.SessionID+"@"+at.Format(time.RFC3339Nano))
	b := Beat{SessionID: in.SessionID, At: at, Note: in.Note}
	err = tx.Create(ctx, bk, b)
	if errors.Is(err, idem.ErrExists) {
		stored, _, err := get[Beat](ctx, tx, bk)
		return nil, stored, err
	}
	if err != nil {
		return nil, Beat{}, err
	}
	s.Heartbeats++
	return nil, b, tx.Update(ctx, sk, ver, s)
}

// NowArgs are get_now's arguments.
type NowArgs struct {
	Device string `json:"device,omitempty" jsonschema:"your device: the session running on it is marked yours"`
}

// Now is get_now's answer.
type Now struct {
	Running []RunningSession `json:"running"`
}

// RunningSession is one running session.
type RunningSession struct {
	SessionID string    `json:"session_id"`
	Device    string    `json:"device"`
	Label     string    `json:"label"`
	StartedAt time.Time `json:"started_at"`
	Yours     bool      `json:"yours" jsonschema:"it runs on the device this call sent"`
}

func (f *focus) getNow(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in NowArgs) (*mcp.CallToolResult, Now, error) {
	if in.Device != "" {
		if err := checkID("device", in.Device); err != nil {
			return nil, Now{}, err
		}
	}
	idx, _, err := get[runningIndex](ctx, tx, key(req, colIndex, "running"))
	if err != nil {
		return nil, Now{}, err
	}
	out := Now{Running: []RunningSession{}}
	for _, id := range slices.Sorted(maps.Keys(idx.Sessions)) {
		e := idx.Sessions[id]
		out.Running = append(out.Running, RunningSession{SessionID: id, Device: e.Device, Label: e.Label, StartedAt: e.Start,
			Yours: in.Device != "" && e.Device == in.Device})
	}
	return nil, out, nil
}

// ListArgs are list_sessions's arguments.
type ListArgs struct {
	Date string `json:"date,omitempty" jsonschema:"the day, as YYYY-MM-DD; default today (UTC)"`
}

// Day is list_sessions's answer.
type Day struct {
	Date          string           `json:"date"`
	Sessions      []SessionState   `json:"sessions"`
	Logs          []LoggedTime     `json:"logs"`
	LoggedMinutes int              `json:"logged_minutes"`
	Steps         int64            `json:"steps" jsonschema:"the day's steps: every device's count and what apps added"`
	DeviceSteps   map[string]int64 `json:"device_steps" jsonschema:"each device's count, as set_steps set it"`
	AddedSteps    int64            `json:"added_steps" jsonschema:"the steps apps added with add_steps"`
}

// SessionState is a session as list_sessions shows it.
type SessionState struct {
	SessionID  string     `json:"session_id"`
	Device     string     `json:"device"`
	Label      string     `json:"label"`
	StartedAt  time.Time  `json:"started_at"`
	Running    bool       `json:"running"`
	End        *time.Time `json:"end,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Notes      []string   `json:"notes"`
	Stops      int        `json:"stops"`
	Heartbeats int        `json:"heartbeats"`
}

func (f *focus) listSessions(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in ListArgs) (*mcp.CallToolResult, Day, error) {
	if in.Date == "" {
		in.Date = f.now().UTC().Format(time.DateOnly)
	} else if err := checkDate(in.Date); err != nil {
		return nil, Day{}, err
	}
	d, _, err := get[day](ctx, tx, key(req, colDays, in.Date))
	if err != nil {
		return nil, Day{}, err
	}
	out := Day{Date: in.Date, Sessions: []SessionState{}, Logs: []LoggedTime{}, LoggedMinutes: d.loggedMinutes(),
		Steps: d.totalSteps(), DeviceSteps: map[string]int64{}, AddedSteps: d.Steps}
	maps.Copy(out.DeviceSteps, d.DeviceSteps)
	for _, id := range slices.Sorted(maps.Keys(d.Sessions)) {
		s, ver, err := get[Session](ctx, tx, key(req, colSessions, id))
		if err != nil {
			return nil, Day{}, err
		}
		if ver == 0 || s.Deleted {
			continue
		}
		out.Sessions = append(out.Sessions, SessionState{SessionID: s.ID, Device: s.Device, Label: s.Label, StartedAt: s.Start,
			Running: s.Running(), End: s.End, Outcome: s.Outcome, Summary: s.Summary, Notes: append([]string{}, s.Notes...),
			Stops: len(s.Stops), Heartbeats: s.Heartbeats})
	}
	for _, id := range slices.Sorted(maps.Keys(d.Logs)) {
		// The note is in the log's own document, not in the day.
		e := d.Logs[id]
		l, ver, err := get[LoggedTime](ctx, tx, key(req, colLogs, id))
		if err != nil {
			return nil, Day{}, err
		}
		if ver == 0 {
			l = LoggedTime{LogID: id, Date: in.Date, StartedAt: e.StartedAt, Minutes: e.Minutes}
		}
		out.Logs = append(out.Logs, l)
	}
	return nil, out, nil
}
