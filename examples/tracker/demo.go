package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// demoRepo is the repository the demo writes to.
const demoRepo = "acme/app"

// demoWait bounds each wait of the demo.
const demoWait = 10 * time.Second

// demoClock is the server's and the fake tracker's clock in the demo: the
// real one, moved ahead where the demo skips a lease instead of waiting.
type demoClock struct{ ahead atomic.Int64 }

func (c *demoClock) now() time.Time       { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *demoClock) skip(d time.Duration) { c.ahead.Add(int64(d)) }

// demo plays clients against the server over streamable HTTP on loopback,
// served as -http serves it (stateless, a new server for every request),
// in front of a fake tracker it breaks on purpose, and prints one line per
// step: the call, the attempt, what the tracker received, the answer.
type demo struct {
	url   string
	hc    *http.Client
	loss  *idemtest.HTTPDropper
	fake  *fakeTracker
	app   *app
	clock *demoClock
	tw    *tabwriter.Writer
	n     int
}

// runDemo runs the scripted clients on store s and writes the table to w.
func runDemo(ctx context.Context, s idem.Store, lease time.Duration, w io.Writer, log *slog.Logger) error {
	clock := &demoClock{}
	token := rand.Text()
	fake := newFakeTracker(token, clock.now)
	base, closeFake, err := fake.listen()
	if err != nil {
		return err
	}
	defer closeFake()
	a := newApp(s, config{API: base, Token: token, Lease: lease, Now: clock.now, Log: log})
	loss := &idemtest.HTTPDropper{Next: exserve.DefaultLimits().Endpoint(a.handler(), nil)}
	hs := httptest.NewServer(loss)
	defer hs.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	d := &demo{url: hs.URL + exserve.Path, hc: &http.Client{Transport: tr}, loss: loss, fake: fake, app: a, clock: clock,
		tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}

	fmt.Fprintln(w, "tracker demo: an MCP server over an issue tracker's REST API that takes no idempotency key (as GitHub), here a fake")
	fmt.Fprintln(w, "in this process. The server is served over streamable HTTP on loopback, stateless, building a new mcp.Server for")
	fmt.Fprintln(w, "every request, and guarded in one line on a fresh SQLite store. Each call is sent on a connection of its own.")
	fmt.Fprintf(w, "Step 7 moves the server's clock past the lease (%v) instead of waiting it out.\n", lease)
	fmt.Fprintln(w)
	fmt.Fprintln(d.tw, "#\tcall\tattempt\ttracker got\tanswer")
	for _, step := range []func(context.Context) error{d.lostAnswer, d.unknownOutcome, d.notMade, d.storm, d.gaveUp, d.list} {
		if err := step(ctx); err != nil {
			d.tw.Flush()
			return err
		}
	}
	if err := d.tw.Flush(); err != nil {
		return err
	}
	got := fake.received()
	issues, comments := len(fake.issues(demoRepo)), len(fake.comments(demoRepo, 1))
	if got.IssueCreates != 5 || issues != 4 || got.CommentCreates != 1 || comments != 1 {
		return fmt.Errorf("demo: the tracker received %d issue creates and made %d issues, received %d comment creates and made %d comments; want 5, 4, 1 and 1",
			got.IssueCreates, issues, got.CommentCreates, comments)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Upstream: %s received, %s made (one per title; the 502 of step 5 made none); %s received,\n",
		plural(got.IssueCreates, "issue create"), plural(issues, "issue"), plural(got.CommentCreates, "comment create"))
	fmt.Fprintf(w, "%s made. The retries, the 8 at once and the model's retry were answered without another create.\n",
		plural(comments, "comment"))
	fmt.Fprintf(w, "The HTTP handler built %d MCP servers, new ones for every request: what the guard needs lives in the store.\n", a.built.Load())
	return nil
}

// connect opens a client session, as a client that (re)connects does.
func (d *demo) connect(ctx context.Context) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "tracker-demo", Version: "v0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: d.hc, MaxRetries: -1}, nil)
}

// call sends one call on a connection of its own.
func (d *demo) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	cs, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// line prints a step: what the tracker received since before, and the
// answer.
func (d *demo) line(call, attempt string, before counts, answer string) {
	d.n++
	fmt.Fprintf(d.tw, "%d\t%s\t%s\t%s\t%s\n", d.n, call, attempt, delta(before, d.fake.received()), answer)
}

// delta says what the tracker received between a and b.
func delta(a, b counts) string {
	var parts []string
	if n := b.Reads - a.Reads; n > 0 {
		parts = append(parts, plural(n, "read"))
	}
	if n := b.IssueCreates + b.CommentCreates - a.IssueCreates - a.CommentCreates; n > 0 {
		parts = append(parts, plural(n, "create"))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// brief is a short form of an answer: the issue or comment, or the code of
// an error and its first clause, and whether it was replayed.
func brief(res *mcp.CallToolResult) string {
	if res.Meta[idem.MetaReplayed] == true {
		return summary(res) + " (replayed)"
	}
	return summary(res)
}

// summary is brief without the replayed mark.
func summary(res *mcp.CallToolResult) string {
	var b strings.Builder
	if res.IsError {
		code, _ := res.Meta[idem.MetaError].(string)
		if code == "" {
			code = "error"
		}
		b.WriteString(code)
		if len(res.Content) == 0 {
			return b.String()
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			first, _, _ := strings.Cut(tc.Text, ", and ") // its first clause
			first, _, _ = strings.Cut(first, ": ")
			b.WriteString(": " + first)
		}
		return b.String()
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var v struct {
		Number int     `json:"number"`
		Title  string  `json:"title"`
		ID     int64   `json:"id"`
		Issues []Issue `json:"issues"`
	}
	_ = json.Unmarshal(raw, &v)
	switch {
	case v.Number != 0:
		fmt.Fprintf(&b, "issue #%d %q", v.Number, v.Title)
	case v.ID != 0:
		fmt.Fprintf(&b, "comment %d", v.ID)
	case v.Issues != nil:
		fmt.Fprintf(&b, "%d issues:", len(v.Issues))
		for _, is := range v.Issues {
			fmt.Fprintf(&b, " #%d", is.Number)
		}
	default:
		b.Write(raw)
	}
	return b.String()
}

// issueArgs are the arguments of a create_issue in the demo's repository.
func issueArgs(title string) map[string]any {
	return map[string]any{"repo": demoRepo, "title": title, "body": "Seen on 1.4.2."}
}

// lostAnswer makes an issue whose answer is lost after the tracker made
// it, then sends the same call again on a new connection.
func (d *demo) lostAnswer(ctx context.Context) error {
	args := issueArgs("Crash on start")
	label := fmt.Sprintf("create_issue %q", args["title"])
	before := d.fake.received()
	d.loss.Arm("create_issue")
	if _, err := d.call(ctx, "create_issue", args); err == nil || d.loss.Dropped() != 1 {
		return fmt.Errorf("demo: the answer was not lost (%v)", err)
	}
	d.line(label, "1st, answer lost", before, "no answer: the connection was reset after the call")
	return d.create(ctx, args, "retry, same arguments")
}

// create sends create_issue with args and prints its row, attempt: what
// the tracker received, and the answer.
func (d *demo) create(ctx context.Context, args map[string]any, attempt string) error {
	before := d.fake.received()
	res, err := d.call(ctx, "create_issue", args)
	if err != nil {
		return err
	}
	d.line(fmt.Sprintf("create_issue %q", args["title"]), attempt, before, brief(res))
	return nil
}

// unknownOutcome makes an issue that the tracker makes and then answers
// 502: the outcome is unknown, and the repeat's reconcile finds the issue.
func (d *demo) unknownOutcome(ctx context.Context) error {
	args := issueArgs("Login fails on Safari")
	d.fake.failNext(fault{create: true, status: http.StatusBadGateway})
	for _, attempt := range []string{"1st: tracker made it, then 502", "retry: reconcile finds it"} {
		if err := d.create(ctx, args, attempt); err != nil {
			return err
		}
	}
	return nil
}

// notMade makes an issue that the tracker answers 502 without making: the
// repeat at once cannot tell yet (the call might still be under way
// upstream); past the lease, reconcile finds nothing, the claim is
// released, and the call runs again.
func (d *demo) notMade(ctx context.Context) error {
	args := issueArgs("Dark mode")
	d.fake.failNext(fault{status: http.StatusBadGateway})
	for i, attempt := range []string{"1st: tracker made none, 502", "retry at once: none found yet", "retry past the lease: none"} {
		if i == 2 {
			d.clock.skip(d.app.lease) // instead of waiting it out
		}
		if err := d.create(ctx, args, attempt); err != nil {
			return err
		}
	}
	return nil
}

// storm sends 8 identical comments at once, each on its own connection,
// while the tracker is slow.
func (d *demo) storm(ctx context.Context) error {
	const n = 8
	args := map[string]any{"repo": demoRepo, "number": 1, "body": "Also on Android."}
	d.fake.slow(100 * time.Millisecond)
	defer d.fake.slow(0)
	before := d.fake.received()
	answers := make([]*mcp.CallToolResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i], errs[i] = d.call(ctx, "add_comment", args) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	distinct, replayed := map[string]bool{}, 0
	for _, res := range answers {
		raw, _ := json.Marshal(res.StructuredContent)
		distinct[string(raw)] = true
		if res.Meta[idem.MetaReplayed] == true {
			replayed++
		}
	}
	d.line(`add_comment #1 "Also on Android."`, fmt.Sprintf("%d at once", n), before,
		fmt.Sprintf("%s, %s to the %d, %d replayed", summary(answers[0]), plural(len(distinct), "distinct answer"), n, replayed))
	return nil
}

// gaveUp makes an issue while the tracker is slow: the client stops
// waiting (as a client's request timeout does) while the call runs on,
// and the model calls again with the same arguments.
func (d *demo) gaveUp(ctx context.Context) error {
	args := issueArgs("Export is slow")
	label := fmt.Sprintf("create_issue %q", args["title"])
	arrived, release := make(chan struct{}), make(chan struct{})
	d.fake.failNext(fault{create: true, hook: func() {
		close(arrived)
		select {
		case <-release:
		case <-time.After(demoWait):
		}
	}})
	before := d.fake.received()
	cctx, giveUp := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() {
		_, err := d.call(cctx, "create_issue", args)
		first <- err
	}()
	select {
	case <-arrived:
	case <-time.After(demoWait):
		giveUp()
		return errors.New("demo: the create did not reach the tracker")
	}
	giveUp()
	select {
	case err := <-first:
		if err == nil {
			return errors.New("demo: the client that gave up got an answer")
		}
	case <-time.After(demoWait):
		return errors.New("demo: the client that gave up still waits")
	}
	d.line(label, "1st: client gave up waiting", before, "no answer: the client stopped waiting; the call runs on")

	before = d.fake.received()
	retry := make(chan struct{})
	var res *mcp.CallToolResult
	var err error
	go func() {
		defer close(retry)
		res, err = d.call(ctx, "create_issue", args)
	}()
	close(release) // the tracker answers the first call
	select {
	case <-retry:
	case <-time.After(demoWait):
		return errors.New("demo: the model's retry got no answer")
	}
	if err != nil {
		return err
	}
	d.line(label, "the model's retry, same args", before, brief(res))
	return nil
}

// list reads the repository's issues.
func (d *demo) list(ctx context.Context) error {
	before := d.fake.received()
	res, err := d.call(ctx, "list_issues", map[string]any{"repo": demoRepo})
	if err != nil {
		return err
	}
	d.line("list_issues "+demoRepo, "read, unguarded", before, brief(res))
	return nil
}
