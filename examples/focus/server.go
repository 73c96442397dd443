package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/merge"
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
)

// slot is a device's running slot: created with create-if-absent by
// start_focus, so a device has at most one running session.
type slot struct {
	SessionID string `json:"session_id"`
}

// runningIndex lists a user's running sessions.
type runningIndex struct {
	Sessions map[string]runningEntry `json:"sessions,omitempty"`
}

type runningEntry struct {
	Device string    `json:"device"`
	Label  string    `json:"label,omitempty"`
	Conn   string    `json:"conn,omitempty"`
	Start  time.Time `json:"start"`
}

// day is what one date holds: the sessions started on it, the time logged
// by log_id, and the steps added.
type day struct {
	Sessions map[string]bool       `json:"sessions,omitempty"`
	Logs     map[string]LoggedTime `json:"logs,omitempty"`
	Steps    int64                 `json:"steps,omitempty"`
}

// LoggedTime is one log_session record.
type LoggedTime struct {
	LogID   string `json:"log_id"`
	Date    string `json:"date"`
	Minutes int    `json:"minutes"`
	Note    string `json:"note,omitempty"`
}

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
}

// focus is the server: its store, clock, the connections it has seen, and
// how many times each tool's handler ran and committed.
type focus struct {
	store idem.Store
	now   func() time.Time

	mu    sync.Mutex
	conns map[*mcp.ServerSession]string

	ran       sync.Map // tool -> *atomic.Int64: handler runs, committed or not
	committed sync.Map // tool -> *atomic.Int64: handler runs that committed
}

// NewServer returns the focus server on store s.
func NewServer(s idem.Store, cfg Config) *mcp.Server {
	srv, _ := newFocus(s, cfg)
	return srv
}

func newFocus(s idem.Store, cfg Config) (*mcp.Server, *focus) {
	f := &focus{store: s, now: cfg.Now, conns: map[*mcp.ServerSession]string{}}
	if f.now == nil {
		f.now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lo := idem.Logger(log)
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-focus", Version: "v0.1.0"}, nil)
	no, yes := ptr(false), ptr(true)

	idem.AddTool(srv, &mcp.Tool{Name: "start_focus",
		Description: "Start a focus session on a device. A device has at most one running session: while one runs, " +
			"this answers that session instead of starting another. Send session_id (an id your app mints) to make a " +
			"retry name the same session; started_at is when the user pressed start, for a queued request.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no},
	}, s, counted(f, "start_focus", f.startFocus), idem.Keys("device"), idem.OpID(), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "end_focus",
		Description: "Stop a focus session. Send session_id (from get_now or start_focus). Without it, only a session " +
			"this connection started and still runs is stopped, and only when the call carries no op_id or end_at; " +
			"otherwise the answer lists the running sessions and their ids. Two devices may stop one session: the " +
			"earliest end wins, every stop is kept, done beats other outcomes, a differing later summary goes to the notes. " +
			"end_at is when the user pressed stop, for a queued request. The answer says what this stop changed.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no},
	}, s, counted(f, "end_focus", f.endFocus), idem.Keys("device"), idem.OpID(), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "delete_session",
		Description: "Delete a focus session. Send session_id; without it, only a session this connection started and " +
			"still runs is deleted, otherwise the answer lists the running sessions and their ids. A repeat (a retry, " +
			"or deleting a deleted session) answers the same and deletes nothing.",
		// Idempotent by its own logic: a deleted session stays a tombstone
		// (a second delete answers the same), and without an id only a
		// session this connection still runs is a target.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes, IdempotentHint: true},
	}, s, counted(f, "delete_session", f.deleteSession), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "log_session",
		Description: "Log focus time done away from a device, replacing the earlier log with the same log_id: " +
			"log_id is the id of what is logged (one entry, one id), so sending it again does not count the time twice.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes},
	}, s, counted(f, "log_session", f.logSession), idem.Keys("log_id"), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "add_steps",
		Description: "Add a number of steps to a day's total. For the phone app, which queues step counts offline: " +
			"it mints op_id when the steps are counted and resends it on every retry.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no},
	}, s, counted(f, "add_steps", f.addSteps), idem.RequireOpID(), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "heartbeat",
		Description: "Record a heartbeat with a note on a session. session_id and at are the keys: one heartbeat per " +
			"session and time, so a repeat answers the stored heartbeat and adds nothing.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no},
	}, s, counted(f, "heartbeat", f.heartbeat), idem.Keys("session_id", "at"), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "get_now",
		Description: "List the running focus sessions with their ids, and which of them this connection started.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: no},
	}, s, counted(f, "get_now", f.getNow), lo)

	idem.AddTool(srv, &mcp.Tool{Name: "list_sessions",
		Description: "List a day's focus sessions, logged time and steps (date as YYYY-MM-DD; default today, UTC).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: no},
	}, s, counted(f, "list_sessions", f.listSessions), lo)

	idem.RegisterStatusTool(srv, s, lo)
	return srv, f
}

func ptr[T any](v T) *T { return &v }

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

// user is whose records a call touches: the authenticated user, as for the
// op records' scope, or "" over stdio.
func user(req *mcp.CallToolRequest) string {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		return req.Extra.TokenInfo.UserID
	}
	return ""
}

// connID names the connection req arrived on, for "this connection started
// it". It is kept in memory only: a new connection (or a restarted server)
// owns nothing, so a call without an id from it is refused, never guessed.
func (f *focus) connID(req *mcp.CallToolRequest) string {
	if req == nil || req.Session == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.conns[req.Session]
	if !ok {
		id = "conn-" + rand.Text()[:12]
		f.conns[req.Session] = id
		go func(ss *mcp.ServerSession) {
			_ = ss.Wait()
			f.mu.Lock()
			delete(f.conns, ss)
			f.mu.Unlock()
		}(req.Session)
	}
	return id
}

// key returns the key of a document of req's user.
func key(req *mcp.CallToolRequest, collection, id string) idem.Key {
	return idem.Key{Owner: user(req), Collection: collection, ID: id}
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
	return t.UTC(), nil
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

// updateIndex applies change to the user's running index.
func updateIndex(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, change func(map[string]runningEntry)) error {
	k := key(req, colIndex, "running")
	idx, ver, err := get[runningIndex](ctx, tx, k)
	if err != nil {
		return err
	}
	if idx.Sessions == nil {
		idx.Sessions = map[string]runningEntry{}
	}
	change(idx.Sessions)
	return save(ctx, tx, k, ver, idx)
}

// updateDay applies change to the day at date.
func updateDay(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, date string, change func(*day)) (day, error) {
	k := key(req, colDays, date)
	d, ver, err := get[day](ctx, tx, k)
	if err != nil {
		return d, err
	}
	change(&d)
	return d, save(ctx, tx, k, ver, d)
}

// StartArgs are start_focus's arguments.
type StartArgs struct {
	Device    string `json:"device" jsonschema:"the device the session runs on, such as phone or laptop"`
	Label     string `json:"label" jsonschema:"what the session is for"`
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
	start, err := idem.EventTime(at, time.Time{}, f.now(), skew)
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
	s := Session{ID: id, Device: in.Device, Label: in.Label, Conn: f.connID(req), Start: start}
	if err := tx.Create(ctx, key(req, colSessions, id), s); err != nil {
		return nil, Started{}, err
	}
	if err := updateIndex(ctx, tx, req, func(m map[string]runningEntry) {
		m[id] = runningEntry{Device: s.Device, Label: s.Label, Conn: s.Conn, Start: s.Start}
	}); err != nil {
		return nil, Started{}, err
	}
	if _, err := updateDay(ctx, tx, req, start.Format(time.DateOnly), func(d *day) {
		if d.Sessions == nil {
			d.Sessions = map[string]bool{}
		}
		d.Sessions[id] = true
	}); err != nil {
		return nil, Started{}, err
	}
	return nil, startedOf(s), nil
}

// resolve returns the session a call names, or the one this connection
// owns when the call names none and is not queued (idem.ResolveTarget).
func (f *focus) resolve(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, id string, queued bool) (string, error) {
	if id != "" {
		return id, checkID("session_id", id)
	}
	idx, _, err := get[runningIndex](ctx, tx, key(req, colIndex, "running"))
	if err != nil {
		return "", err
	}
	conn := f.connID(req)
	var owned, others []idem.Candidate
	for _, sid := range slices.Sorted(maps.Keys(idx.Sessions)) {
		e := idx.Sessions[sid]
		c := idem.Candidate{ID: sid, Label: e.Label + " on " + e.Device}
		if conn != "" && e.Conn == conn {
			owned = append(owned, c)
		} else {
			others = append(others, c)
		}
	}
	return idem.ResolveTarget(idem.TargetQuery{Owned: owned, Others: others, Queued: queued, Request: req})
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
	return updateIndex(ctx, tx, req, func(m map[string]runningEntry) { delete(m, s.ID) })
}

// EndArgs are end_focus's arguments.
type EndArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to stop, from get_now or start_focus"`
	EndAt     string `json:"end_at,omitempty" jsonschema:"when the user pressed stop (RFC 3339), for a queued request; default now"`
	Summary   string `json:"summary,omitempty" jsonschema:"what was done"`
	Outcome   string `json:"outcome,omitempty" jsonschema:"done (default), abandoned or interrupted"`
	Device    string `json:"device" jsonschema:"the device sending the stop"`
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
	id, err := f.resolve(ctx, tx, req, in.SessionID, in.EndAt != "")
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
	end, err := idem.EventTime(at, s.Start, f.now(), skew)
	if err != nil {
		return nil, Ended{}, err
	}
	// A stop is kept under the op id that the app minted for it; a stop
	// without one under its device, so a model's repeat is the same stop.
	stopKey := "device:" + in.Device
	if opID := opIDOf(req); opID != "" {
		stopKey = "op:" + opID
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
	after := ch.After
	result, sentence := stopEffect(after, stopKey)
	return nil, Ended{SessionID: after.ID, End: *after.End, Outcome: after.Outcome, Summary: after.Summary,
		Notes: append([]string{}, after.Notes...), Stops: len(after.Stops), Result: result, Message: sentence}, nil
}

// opIDOf returns the op id a call carries as its op_id argument or in
// _meta, as the middleware accepted it.
func opIDOf(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	if id, ok := req.Params.Meta[idem.MetaOpID].(string); ok && id != "" {
		return id
	}
	var args struct {
		OpID string `json:"op_id"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &args)
	return args.OpID
}

// DeleteArgs are delete_session's arguments.
type DeleteArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to delete, from get_now or list_sessions"`
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
	id, err := f.resolve(ctx, tx, req, in.SessionID, false)
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
	if _, err := updateDay(ctx, tx, req, s.Start.Format(time.DateOnly), func(d *day) { delete(d.Sessions, id) }); err != nil {
		return nil, Deleted{}, err
	}
	return nil, answer, nil
}

// LogArgs are log_session's arguments.
type LogArgs struct {
	LogID   string `json:"log_id" jsonschema:"the id of what is logged; logging it again replaces it"`
	Date    string `json:"date" jsonschema:"the day, as YYYY-MM-DD"`
	Minutes int    `json:"minutes" jsonschema:"minutes of focus, 1 to 1440"`
	Note    string `json:"note,omitempty" jsonschema:"what it was"`
}

// Logged is log_session's answer.
type Logged struct {
	LoggedTime
	DayMinutes int `json:"day_minutes"`
}

// logSession replaces the log at log_id, and the day's entry for it.
func (f *focus) logSession(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in LogArgs) (*mcp.CallToolResult, Logged, error) {
	if err := checkID("log_id", in.LogID); err != nil {
		return nil, Logged{}, err
	}
	if err := checkDate(in.Date); err != nil {
		return nil, Logged{}, err
	}
	if in.Minutes < 1 || in.Minutes > 24*60 {
		return nil, Logged{}, refuse("minutes must be 1 to 1440")
	}
	lt := LoggedTime{LogID: in.LogID, Date: in.Date, Minutes: in.Minutes, Note: in.Note}
	k := key(req, colLogs, in.LogID)
	old, ver, err := get[LoggedTime](ctx, tx, k)
	if err != nil {
		return nil, Logged{}, err
	}
	if ver != 0 && old.Date != in.Date {
		// The entry moved to another day: it leaves the old one.
		if _, err := updateDay(ctx, tx, req, old.Date, func(d *day) { delete(d.Logs, in.LogID) }); err != nil {
			return nil, Logged{}, err
		}
	}
	if err := tx.Put(ctx, k, lt); err != nil {
		return nil, Logged{}, err
	}
	d, err := updateDay(ctx, tx, req, in.Date, func(d *day) {
		if d.Logs == nil {
			d.Logs = map[string]LoggedTime{}
		}
		d.Logs[in.LogID] = lt
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

// addSteps adds to the day's total: an append, made safe by the op id the
// middleware requires and stores with the change.
func (f *focus) addSteps(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in StepsArgs) (*mcp.CallToolResult, StepsAdded, error) {
	if err := checkDate(in.Date); err != nil {
		return nil, StepsAdded{}, err
	}
	if in.Steps < 1 || in.Steps > 100000 {
		return nil, StepsAdded{}, refuse("steps must be 1 to 100000")
	}
	d, err := updateDay(ctx, tx, req, in.Date, func(d *day) { d.Steps += in.Steps })
	if err != nil {
		return nil, StepsAdded{}, err
	}
	return nil, StepsAdded{Date: in.Date, Added: in.Steps, DaySteps: d.Steps}, nil
}

// BeatArgs are heartbeat's arguments.
type BeatArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session, from start_focus or get_now"`
	At        string `json:"at" jsonschema:"when the heartbeat was taken (RFC 3339)"`
	Note      string `json:"note" jsonschema:"what is going on"`
}

// heartbeat creates the heartbeat at (session_id, at) if it is absent; a
// repeat answers the stored one and counts nothing.
func (f *focus) heartbeat(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in BeatArgs) (*mcp.CallToolResult, Beat, error) {
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
	if _, err := idem.EventTime(at, s.Start, f.now(), skew); err != nil {
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

// NowArgs: get_now takes no arguments.
type NowArgs struct{}

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
	Yours     bool      `json:"yours" jsonschema:"this connection started it"`
}

func (f *focus) getNow(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, _ NowArgs) (*mcp.CallToolResult, Now, error) {
	idx, _, err := get[runningIndex](ctx, tx, key(req, colIndex, "running"))
	if err != nil {
		return nil, Now{}, err
	}
	conn := f.connID(req)
	out := Now{Running: []RunningSession{}}
	for _, id := range slices.Sorted(maps.Keys(idx.Sessions)) {
		e := idx.Sessions[id]
		out.Running = append(out.Running, RunningSession{SessionID: id, Device: e.Device, Label: e.Label, StartedAt: e.Start,
			Yours: conn != "" && e.Conn == conn})
	}
	return nil, out, nil
}

// ListArgs are list_sessions's arguments.
type ListArgs struct {
	Date string `json:"date,omitempty" jsonschema:"the day, as YYYY-MM-DD; default today (UTC)"`
}

// Day is list_sessions's answer.
type Day struct {
	Date          string         `json:"date"`
	Sessions      []SessionState `json:"sessions"`
	Logs          []LoggedTime   `json:"logs"`
	LoggedMinutes int            `json:"logged_minutes"`
	Steps         int64          `json:"steps"`
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
	out := Day{Date: in.Date, Sessions: []SessionState{}, Logs: []LoggedTime{}, LoggedMinutes: d.loggedMinutes(), Steps: d.Steps}
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
		out.Logs = append(out.Logs, d.Logs[id])
	}
	return nil, out, nil
}
