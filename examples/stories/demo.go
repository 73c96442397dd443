package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// demo is the scripted client of -demo: it calls the server in this
// process and prints one row per call.
type demo struct {
	a   *app
	srv *mcp.Server
	tw  *tabwriter.Writer
}

// runDemo plays a model whose answers get lost: every write tool's first
// answer is dropped after the server committed and the call is sent again
// on a new connection; then the edit again, the same and reworded, as a
// model that lost its answer may send it; then a storm of parallel reports and publishes; then
// what the store and the social service hold.
func runDemo(ctx context.Context, a *app, social *Social, w io.Writer) error {
	d := &demo{a: a, srv: a.server(), tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(d.tw, "call\tattempt\thandler ran\tanswer")
	story := map[string]any{"slug": "login-loop", "title": "Login loops after a password reset", "body": "Reset the password, then sign in twice."}
	writes := []struct {
		tool string
		args map[string]any
	}{
		{"publish_story", story},
		{"report_reproduction", map[string]any{"slug": "login-loop", "handle": "@ana", "note": "same on Firefox", "op_id": "demo-op-1"}},
		{"edit_story", map[string]any{"slug": "login-loop", "revision": 1, "body": "Reset the password, then sign in twice within a minute."}},
		{"report_check", map[string]any{"slug": "login-loop", "handle": "@ben", "result": "pass"}},
	}
	for _, c := range writes {
		if err := d.dropThenRetry(ctx, c.tool, c.args); err != nil {
			return err
		}
	}
	cs, err := idemtest.Connect(ctx, d.srv, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	d.call(ctx, cs, "edit_story", map[string]any{"slug": "login-loop", "revision": 1, "body": "Reset the password, then sign in twice within a minute."}, "same body again")
	d.call(ctx, cs, "edit_story", map[string]any{"slug": "login-loop", "revision": 1, "body": "Reset the password and sign in twice in under a minute."}, "reworded body")
	d.call(ctx, cs, "get_operation", map[string]any{"tool": "report_reproduction", "op_id": "demo-op-1"}, "1")

	handles := make([]map[string]any, 16)
	for i := range handles {
		handles[i] = map[string]any{"slug": "login-loop", "handle": fmt.Sprintf("@r%02d", i+1)}
	}
	d.storm(ctx, "report_reproduction", "16 handles", handles)
	same := make([]map[string]any, 16)
	for i := range same {
		same[i] = map[string]any{"slug": "login-loop", "handle": "@r01", "note": "again"}
	}
	d.storm(ctx, "report_reproduction", "one handle", same)
	fresh := make([]map[string]any, 16)
	for i := range fresh {
		fresh[i] = map[string]any{"slug": "cache-stale", "title": "Stale cache after deploy", "body": "Deploy, then reload."}
	}
	d.storm(ctx, "publish_story", "one new slug", fresh)

	res := d.call(ctx, cs, "get_story", map[string]any{"slug": "login-loop"}, "1")
	if err := d.tw.Flush(); err != nil {
		return err
	}
	var view StoryView
	if res == nil || res.IsError || remarshal(res.StructuredContent, &view) != nil {
		return fmt.Errorf("demo: get_story did not answer")
	}
	st := social.Stats()
	fmt.Fprintf(w, "\nlogin-loop: revision %d, %d reproductions, %d checks.\n", view.Revision, view.Reproductions, len(view.Checks))
	fmt.Fprintf(w, "social service: %d requests, %d repeated keys; %d announcements, %d reproduction notices, %d revision notices.\n",
		st.Requests, st.Repeats, st.Count("announcement"), st.Count("reproduction"), st.Count("revision"))
	fmt.Fprintln(w, "So: every lost answer was retried and each write landed once; the edit resent with a reworded body on its old revision was refused; 16 parallel reports counted each handle once and notified once per new reproducer; 16 parallel publishes of one story announced it once.")
	return nil
}

// dropThenRetry sends a call whose answer is lost after the commit, then
// sends it again on a new connection, as a client that reconnects does.
func (d *demo) dropThenRetry(ctx context.Context, tool string, args map[string]any) error {
	drop := &idemtest.Dropper{Tool: tool}
	cs, err := idemtest.Connect(ctx, d.srv, drop.Wrap)
	if err != nil {
		return err
	}
	d.call(ctx, cs, tool, args, "1")
	cs.Close()
	if drop.Dropped() != 1 {
		return fmt.Errorf("demo: the answer of %s was not lost", tool)
	}
	if cs, err = idemtest.Connect(ctx, d.srv, nil); err != nil {
		return err
	}
	defer cs.Close()
	d.call(ctx, cs, tool, args, "2, new connection")
	return nil
}

// call sends one call and prints its row.
func (d *demo) call(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, attempt string) *mcp.CallToolResult {
	before := d.a.ran(tool)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	fmt.Fprintf(d.tw, "%s %s\t%s\t%s\t%s\n", tool, brief(args), attempt, ranText(tool, d.a.ran(tool)-before), answerText(res, err))
	return res
}

// storm sends the calls in parallel, each on a connection of its own, and
// prints one row for them all.
func (d *demo) storm(ctx context.Context, tool, what string, calls []map[string]any) {
	before := d.a.ran(tool)
	answers := make([]string, len(calls))
	var wg sync.WaitGroup
	for i, args := range calls {
		wg.Go(func() {
			cs, err := idemtest.Connect(ctx, d.srv, nil)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			answers[i] = answerText(res, err)
		})
	}
	wg.Wait()
	distinct := map[string]int{}
	for _, a := range answers {
		distinct[a]++
	}
	var parts []string
	for a, n := range distinct {
		parts = append(parts, fmt.Sprintf("%dx %s", n, a))
	}
	if len(parts) > 3 {
		last := answers[len(answers)-1]
		parts = []string{fmt.Sprintf("%d distinct answers, such as %s", len(distinct), last)}
	}
	fmt.Fprintf(d.tw, "%s x%d in parallel (%s)\t1 each\t%s\t%s\n", tool, len(calls), what, ranText(tool, d.a.ran(tool)-before), strings.Join(parts, "; "))
}

func ranText(tool string, n int64) string {
	switch {
	case tool == "get_operation":
		return "-"
	case n == 0:
		return "no"
	case n == 1:
		return "yes"
	}
	return fmt.Sprintf("%d times", n)
}

// answerText is what a call answered, as a row shows it.
func answerText(res *mcp.CallToolResult, err error) string {
	switch {
	case err != nil:
		return "no answer: the connection closed after the server committed"
	case res.IsError:
		return fmt.Sprintf("refused (%v)", res.Meta[idem.MetaError])
	}
	var m map[string]any
	_ = remarshal(res.StructuredContent, &m)
	delete(m, "committed_at") // get_operation's: differs every run
	b, _ := json.Marshal(m)
	s := string(b)
	if len(s) > 90 {
		s = s[:87] + "..."
	}
	if res.Meta[idem.MetaReplayed] == true {
		s += " (replayed)"
	}
	return s
}

// brief shows a call's key arguments.
func brief(args map[string]any) string {
	var parts []string
	for _, k := range []string{"slug", "revision", "handle", "result", "op_id", "tool"} {
		if v, ok := args[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

// remarshal copies v into out through JSON.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
