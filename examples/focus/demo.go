package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// demoNow is the server's clock in the demo: 16:40, when the phone that
// was offline since 14:05 gets its queued stop through.
var demoNow = time.Date(2026, 3, 2, 16, 40, 0, 0, time.UTC)

// demo plays a client against the server, over streamable HTTP on
// loopback as -http serves it (stateless: every request is a connection of
// its own), and prints one line per call: the call, the attempt, whether
// the handler ran, and the answer.
type demo struct {
	ctx  context.Context
	url  string
	hc   *http.Client
	loss *idemtest.HTTPDropper
	f    *focus
	tw   *tabwriter.Writer
	n    int
}

// runDemo runs the scripted client on store s and writes the table to w.
func runDemo(ctx context.Context, s idem.Store, w io.Writer) error {
	srv, f := newFocus(s, Config{Now: func() time.Time { return demoNow }})
	loss := &idemtest.HTTPDropper{Next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})}
	hs := httptest.NewServer(loss)
	defer hs.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	d := &demo{ctx: ctx, url: hs.URL, hc: &http.Client{Transport: tr}, loss: loss, f: f, tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(w, "focus demo: each write sent again after its answer was lost, a model's retry with a new op id, two devices stopping")
	fmt.Fprintln(w, "one session in both orders, a stop by device without an id, parallel bursts. Over streamable HTTP on loopback,")
	fmt.Fprintln(w, "stateless as -http serves it: every request is a connection of its own, so nothing may depend on the connection.")
	fmt.Fprintln(w, "The server's clock reads 16:40; the phone queued its stop at 14:05 while offline.")
	fmt.Fprintln(w)
	fmt.Fprintln(d.tw, "#\tcall\tattempt\thandler\tanswer")
	steps := []func() error{d.dropped, d.twoDevices, d.byDevice, d.bursts}
	for _, step := range steps {
		if err := step(); err != nil {
			d.tw.Flush()
			return err
		}
	}
	if err := d.tw.Flush(); err != nil {
		return err
	}
	var dy day
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, idem.Key{Collection: colDays, ID: "2026-03-02"}, &dy)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "So: each retry after a lost answer was answered from the stored result (op_id) or wrote the same record (keys),\n")
	fmt.Fprintf(w, "the model's retry with a new op id included: the day holds %d steps (the phone's count of 1200, set once, and the\n",
		dy.totalSteps())
	fmt.Fprintf(w, "app's 250 + 300, each added once), %d logged minutes (25, once) and %d sessions; the phone's stop queued at 14:05\n",
		dy.loggedMinutes(), len(dy.Sessions))
	fmt.Fprintf(w, "was recorded at 14:05, both arrival orders stored the same session, a stop without an id stopped the session on\n")
	fmt.Fprintf(w, "the caller's device, and one from a device that runs nothing was refused with the candidates and their ids.\n")
	return nil
}

// connect opens a client session over HTTP, as a client that reconnects
// does.
func (d *demo) connect() (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "focus-demo", Version: "v0"}, nil)
	return c.Connect(d.ctx, &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.hc}, nil)
}

// call sends one call on cs and prints its line; dropped says the answer
// is expected to be lost.
func (d *demo) call(cs *mcp.ClientSession, label, attempt, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ran0, com0 := d.f.Runs(tool)
	res, err := cs.CallTool(d.ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	ran1, com1 := d.f.Runs(tool)
	answer := ""
	switch {
	case err != nil:
		answer = "no answer: the connection was reset after the commit"
	default:
		answer = answerOf(res)
	}
	d.line(label, attempt, handlerSaid(ran1-ran0, com1-com0), answer)
	if err != nil && !strings.Contains(attempt, "lost") {
		return nil, fmt.Errorf("demo: %s: %v", label, err)
	}
	return res, nil
}

func (d *demo) line(cols ...string) {
	d.n++
	fmt.Fprintf(d.tw, "%d\t%s\n", d.n, strings.Join(cols, "\t"))
}

// handlerSaid says whether the handler ran and committed.
func handlerSaid(ran, committed int64) string {
	switch {
	case ran == 0:
		return "did not run"
	case committed == 0:
		return "ran, saved nothing"
	case ran == 1:
		return "ran"
	default:
		return fmt.Sprintf("ran %d times", ran)
	}
}

// answerOf is a short form of a tool's answer: the message, the code of a
// refusal, and whether it was a replay.
func answerOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	if res.IsError {
		fmt.Fprintf(&b, "refused: %v: ", res.Meta[idem.MetaError])
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
		return b.String()
	}
	m, _ := res.StructuredContent.(map[string]any)
	if m == nil {
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &m)
	}
	switch {
	case m["message"] != nil:
		b.WriteString(fmt.Sprint(m["message"]))
	case m["added"] != nil:
		fmt.Fprintf(&b, "added %v, day total %v steps", m["added"], m["day_steps"])
	case m["day_steps"] != nil:
		fmt.Fprintf(&b, "%v set to %v, day total %v steps", m["device"], m["steps"], m["day_steps"])
	case m["day_minutes"] != nil:
		fmt.Fprintf(&b, "logged %v min, day total %v min", m["minutes"], m["day_minutes"])
	case m["note"] != nil:
		fmt.Fprintf(&b, "heartbeat at %v", m["at"])
	case m["sessions"] != nil:
		sessions, _ := m["sessions"].([]any)
		fmt.Fprintf(&b, "%d sessions, %v min logged, %v steps", len(sessions), m["logged_minutes"], m["steps"])
	case m["running"] != nil:
		var ids []string
		running, _ := m["running"].([]any)
		for _, r := range running {
			rm, _ := r.(map[string]any)
			yours := ""
			if rm["yours"] == true {
				yours = " (yours)"
			}
			ids = append(ids, fmt.Sprintf("%v on %v%s", rm["session_id"], rm["device"], yours))
		}
		fmt.Fprintf(&b, "running: %s", strings.Join(ids, ", "))
	case m["status"] != nil:
		fmt.Fprintf(&b, "status %v", m["status"])
	default:
		raw, _ := json.Marshal(m)
		b.Write(raw)
	}
	if res.Meta[idem.MetaReplayed] == true {
		b.WriteString(" (replayed from the stored result)")
	}
	return b.String()
}

// dropped sends each write tool once and loses its answer after the
// commit, then sends it again on a new connection: the same call (an app's
// retry), or for set_steps what a model sends after a reset, a new op id
// it minted.
func (d *demo) dropped() error {
	calls := []struct {
		label, tool string
		args, retry map[string]any
	}{
		{"start_focus phone, op_id", "start_focus", map[string]any{"device": "phone", "label": "write the guide", "session_id": "s-guide", "started_at": "2026-03-02T13:30:00Z", "op_id": "op-start-1"}, nil},
		{"heartbeat s-guide 13:50", "heartbeat", map[string]any{"session_id": "s-guide", "at": "2026-03-02T13:50:00Z", "note": "outline done"}, nil},
		{"set_steps phone 1200 (a model)", "set_steps", map[string]any{"device": "phone", "date": "2026-03-02", "steps": 1200},
			map[string]any{"device": "phone", "date": "2026-03-02", "steps": 1200, "op_id": "op-minted-by-the-model"}},
		{"add_steps 250, op_id (an app)", "add_steps", map[string]any{"date": "2026-03-02", "steps": 250, "op_id": "op-steps-1"}, nil},
		{"log_session walk-1 25 min", "log_session", map[string]any{"log_id": "walk-1", "started_at": "2026-03-02T07:00:00Z", "minutes": 25, "note": "walk"}, nil},
		{"end_focus s-guide, op_id", "end_focus", map[string]any{"session_id": "s-guide", "device": "phone", "end_at": "2026-03-02T14:05:00Z", "outcome": "done", "op_id": "op-stop-1"}, nil},
		{"delete_session s-guide", "delete_session", map[string]any{"session_id": "s-guide"}, nil},
	}
	for _, c := range calls {
		cs, err := d.connect()
		if err != nil {
			return err
		}
		lost := d.loss.Dropped()
		d.loss.Arm(c.tool)
		_, _ = d.call(cs, c.label, "1st, answer lost", c.tool, c.args)
		cs.Close()
		if d.loss.Dropped() != lost+1 {
			return fmt.Errorf("demo: %s: the answer was not lost", c.label)
		}
		if cs, err = d.connect(); err != nil {
			return err
		}
		retry, attempt := c.args, "retry, new connection"
		if c.retry != nil {
			retry, attempt = c.retry, "retry, new op_id"
		}
		_, err = d.call(cs, c.label, attempt, c.tool, retry)
		cs.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// twoDevices stops two sessions from a phone (14:05, queued offline) and a
// laptop (14:20): one in each arrival order. Both store the same view.
func (d *demo) twoDevices() error {
	cs, err := d.connect()
	if err != nil {
		return err
	}
	defer cs.Close()
	phone := func(id string) map[string]any {
		return map[string]any{"session_id": id, "device": "phone", "end_at": "2026-03-02T14:05:00Z", "outcome": "abandoned", "summary": "a call came in", "op_id": "op-phone-" + id}
	}
	laptop := func(id string) map[string]any {
		return map[string]any{"session_id": id, "device": "laptop", "end_at": "2026-03-02T14:20:00Z", "outcome": "done", "summary": "drafted the chapter"}
	}
	for _, o := range []struct {
		id, device string
		first      func(string) map[string]any
		second     func(string) map[string]any
		names      [2]string
	}{
		{"s-a", "desk", laptop, phone, [2]string{"laptop 14:20", "phone 14:05, late"}},
		{"s-b", "tablet", phone, laptop, [2]string{"phone 14:05", "laptop 14:20, late"}},
	} {
		start := map[string]any{"device": o.device, "label": "chapter", "session_id": o.id, "started_at": "2026-03-02T13:30:00Z"}
		if _, err := d.call(cs, "start_focus "+o.device+" "+o.id, "1st", "start_focus", start); err != nil {
			return err
		}
		for i, args := range []map[string]any{o.first(o.id), o.second(o.id)} {
			if _, err := d.call(cs, "end_focus "+o.id+" from "+o.names[i], "1st", "end_focus", args); err != nil {
				return err
			}
		}
	}
	var views []string
	for _, id := range []string{"s-a", "s-b"} {
		s, err := d.session(id)
		if err != nil {
			return err
		}
		views = append(views, fmt.Sprintf("end %s, outcome %s, summary %q, notes %q, %d stops",
			s.End.Format("15:04"), s.Outcome, s.Summary, s.Notes, len(s.Stops)))
	}
	same := "the same session in both orders"
	if views[0] != views[1] {
		same = "DIFFERENT"
	}
	d.line("stored s-a and s-b", "read the store", "-", views[0]+": "+same)
	return nil
}

// session reads a stored session of the stdio user.
func (d *demo) session(id string) (Session, error) {
	var s Session
	err := d.f.store.Run(d.ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, idem.Key{Collection: colSessions, ID: id}, &s)
		return err
	})
	return s, err
}

// byDevice starts two sessions, then stops and deletes without a session
// id, each call on a connection of its own: a device that runs nothing is
// refused with the candidates; the phone's stop stops the phone's session,
// and its repeat stops nothing else.
func (d *demo) byDevice() error {
	steps := []struct {
		label, attempt, tool string
		args                 map[string]any
	}{
		{"start_focus phone", "1st", "start_focus", map[string]any{"device": "phone", "label": "email", "session_id": "s-mail", "started_at": "2026-03-02T15:00:00Z"}},
		{"start_focus laptop", "1st", "start_focus", map[string]any{"device": "laptop", "label": "code review", "session_id": "s-review", "started_at": "2026-03-02T15:10:00Z"}},
		{"get_now from the phone", "read", "get_now", map[string]any{"device": "phone"}},
		{"end_focus watch, no session_id", "1st", "end_focus", map[string]any{"device": "watch"}},
		{"delete_session, no session_id", "1st", "delete_session", map[string]any{}},
		{"end_focus phone, no session_id", "1st", "end_focus", map[string]any{"device": "phone"}},
		{"end_focus phone, no session_id", "sent again", "end_focus", map[string]any{"device": "phone"}},
	}
	for _, st := range steps {
		cs, err := d.connect()
		if err != nil {
			return err
		}
		_, err = d.call(cs, st.label, st.attempt, st.tool, st.args)
		cs.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// bursts sends 16 copies of one call at once: add_steps with one op id,
// and start_focus on one device without a session id.
func (d *demo) bursts() error {
	const n = 16
	for _, b := range []struct {
		label, tool string
		args        map[string]any
	}{
		{"add_steps 300, one op_id", "add_steps", map[string]any{"date": "2026-03-02", "steps": 300, "op_id": "op-steps-burst"}},
		{"start_focus watch, no id", "start_focus", map[string]any{"device": "watch", "label": "reading"}},
	} {
		cs, err := d.connect()
		if err != nil {
			return err
		}
		ran0, com0 := d.f.Runs(b.tool)
		answers := make([]string, n)
		var wg sync.WaitGroup
		var firstErr error
		var mu sync.Mutex
		for i := range n {
			wg.Go(func() {
				res, err := cs.CallTool(d.ctx, &mcp.CallToolParams{Name: b.tool, Arguments: b.args})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					firstErr = err
					return
				}
				raw, _ := json.Marshal(res.StructuredContent)
				answers[i] = string(raw)
			})
		}
		wg.Wait()
		cs.Close()
		if firstErr != nil {
			return firstErr
		}
		distinct := map[string]bool{}
		for _, a := range answers {
			distinct[a] = true
		}
		ran1, com1 := d.f.Runs(b.tool)
		d.line(b.label, fmt.Sprintf("%d at once", n), handlerSaid(ran1-ran0, com1-com0),
			fmt.Sprintf("%d distinct answer(s) of %d", len(distinct), n))
	}
	cs, err := d.connect()
	if err != nil {
		return err
	}
	defer cs.Close()
	if _, err := d.call(cs, "list_sessions 2026-03-02", "read", "list_sessions", map[string]any{"date": "2026-03-02"}); err != nil {
		return err
	}
	_, err = d.call(cs, "get_now from the watch", "read", "get_now", map[string]any{"device": "watch"})
	return err
}
