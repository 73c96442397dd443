package canary

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemclient"
)

// A Case is one row of the post-commit-disconnect matrix: a tool whose
// first answer is lost after it committed, how it is lost, whether the
// client trusts the server, and what the server says of the tool.
type Case struct {
	Name        string
	Tool        string
	Trusted     bool
	Drop        Drop
	Annotations Annotations
}

// replayable reports whether every gate allows one replay: a trusted
// server, a tool whose declared hint says a repeat is harmless, and the
// same hint after reconnecting.
func (c Case) replayable() bool {
	return c.Trusted && c.Annotations == Declared && c.Tool != ToolIncrement
}

// annotations says what the server lists for the tool, for the record.
func (c Case) annotations() string {
	declared := map[string]string{
		ToolIncrement: "idempotentHint: false",
		ToolSetStatus: "idempotentHint: true",
		ToolLookup:    "readOnlyHint: true",
	}[c.Tool]
	switch c.Annotations {
	case Missing:
		return "missing"
	case Replaced:
		return declared + ", missing after reconnect (replacement server)"
	}
	return declared
}

// Cases is the matrix: the unsafe tool under every gate that must block a
// replay, the idempotent and read-only controls, and a replacement server
// that lost the annotation.
var Cases = []Case{
	{"unsafe-reset", ToolIncrement, true, DropReset, Declared},
	{"unsafe-cut", ToolIncrement, true, DropCut, Declared},
	{"unsafe-missing", ToolIncrement, true, DropCut, Missing},
	{"unsafe-untrusted", ToolIncrement, false, DropReset, Declared},
	{"idempotent-reset", ToolSetStatus, true, DropReset, Declared},
	{"idempotent-cut", ToolSetStatus, true, DropCut, Declared},
	{"idempotent-untrusted", ToolSetStatus, false, DropReset, Declared},
	{"idempotent-missing", ToolSetStatus, true, DropReset, Missing},
	{"replacement", ToolSetStatus, true, DropReset, Replaced},
	{"readonly-reset", ToolLookup, true, DropReset, Declared},
}

// Verdicts.
const (
	Pass = "PASS" // what the gates require
	Fail = "FAIL" // unsafe: a replay where a gate forbids one, whatever it was answered, a second logical change, or an argument value in the error
	Miss = "MISS" // safe but needless: where every gate allows one replay, none, or one not answered with the tool's result
)

// Record is the evidence of one case.
type Record struct {
	Case              string `json:"case"`
	Policy            string `json:"policy"`
	Tool              string `json:"tool"`
	ServerTrusted     bool   `json:"server_trusted"`
	Annotations       string `json:"annotations"`
	Drop              string `json:"drop"`
	ServerInvocations int    `json:"server_invocations"`
	ReplayInvocations int    `json:"replay_invocations"`
	ExternalState     string `json:"external_state"`
	ClientResult      string `json:"client_result"`
	Reconcile         string `json:"reconcile,omitempty"`
	Verdict           string `json:"verdict"`
	Why               string `json:"why,omitempty"`
}

// Runner runs the matrix against the canary at Base (its root URL, the
// one that serves /mcp).
type Runner struct {
	Base   string
	Policy Policy
	// HTTP is the client for the canary; nil means a new one per case.
	HTTP *http.Client
}

// Run runs each case in order on a run of its own and calls emit with its
// record as soon as it is known.
func (r *Runner) Run(ctx context.Context, cases []Case, emit func(Record)) error {
	prefix := strings.ToLower(rand.Text()[:8])
	for _, c := range cases {
		rec, err := r.runCase(ctx, prefix+"-"+c.Name, c)
		if err != nil {
			return fmt.Errorf("case %s: %w", c.Name, err)
		}
		emit(rec)
	}
	return nil
}

func (r *Runner) runCase(ctx context.Context, run string, c Case) (Record, error) {
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer hc.CloseIdleConnections()
	}
	q := url.Values{"drop": {string(c.Drop)}, "annotations": {string(c.Annotations)}}
	endpoint := r.Base + "/mcp/" + run + "?" + q.Encode()
	connect := func(ctx context.Context) (*mcp.ClientSession, error) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "idem-canary-" + r.Policy.Name, Version: "v0.1.0"}, nil)
		return cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	}
	// A value that must appear in no error the client gives back.
	marker := "canary-value-" + strings.ToLower(rand.Text()[:10])
	var args any
	switch c.Tool {
	case ToolIncrement:
		args = IncrementIn{Note: marker}
	case ToolSetStatus:
		args = StatusIn{Item: "ticket-1", Status: marker}
	default:
		args = LookupIn{Item: marker}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	out := r.Policy.call(cctx, connect, c.Trusted, &mcp.CallToolParams{Name: c.Tool, Arguments: args})
	cancel()
	st, err := fetchStats(ctx, hc, r.Base+"/stats/"+run)
	if err != nil {
		return Record{}, err
	}
	rec := Record{
		Case:          c.Name,
		Policy:        r.Policy.Name,
		Tool:          c.Tool,
		ServerTrusted: c.Trusted,
		Annotations:   c.annotations(),
		Drop:          c.Drop.Describe(),
		Reconcile:     string(out.reconciled),
	}
	judge(&rec, c, st, out, marker)
	return rec, nil
}

func fetchStats(ctx context.Context, hc *http.Client, u string) (Stats, error) {
	var st Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("reading the canary's counts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("reading the canary's counts: %s (is this an idem canary server?)", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("reading the canary's counts: %w", err)
	}
	return st, nil
}

// judge fills the record's counts, state, result and verdict.
func judge(rec *Record, c Case, st Stats, out outcome, marker string) {
	rec.ServerInvocations = st.Invocations[c.Tool]
	rec.ReplayInvocations = max(st.Received[c.Tool]-1, 0)
	var u *idemclient.UnknownOutcomeError
	switch {
	case out.err == nil && out.res != nil && !out.res.IsError:
		rec.ClientResult = "ok"
	case out.err == nil && out.res != nil:
		rec.ClientResult = "tool error"
	case errors.As(out.err, &u):
		op := "no op id"
		if u.OpID != "" {
			op = "op id sent"
		}
		rec.ClientResult = fmt.Sprintf("unknown outcome (%s, argument fingerprint %.12s…)", op, u.Fingerprint)
	default:
		rec.ClientResult = "error, outcome not stated"
	}
	changes := 0
	switch c.Tool {
	case ToolIncrement:
		changes = st.Counter
		rec.ExternalState = fmt.Sprintf("counter %d", st.Counter)
	case ToolSetStatus:
		changes = st.StatusChanges
		rec.ExternalState = fmt.Sprintf("%d status change(s)", st.StatusChanges)
	default:
		changes = st.Counter + st.StatusChanges
		rec.ExternalState = fmt.Sprintf("unchanged: %v", changes == 0)
	}
	var fails, misses []string
	if out.err != nil && strings.Contains(out.err.Error(), marker) {
		fails = append(fails, "the error quotes an argument value")
	}
	wantChanges := 1
	if c.Tool == ToolLookup {
		wantChanges = 0
	}
	if changes > wantChanges {
		fails = append(fails, fmt.Sprintf("%d logical changes, want %d", changes, wantChanges))
	}
	if c.replayable() {
		switch {
		case rec.ReplayInvocations > 1:
			fails = append(fails, fmt.Sprintf("%d replays, at most 1 expected", rec.ReplayInvocations))
		case rec.ReplayInvocations == 0 || rec.ClientResult != "ok":
			misses = append(misses, fmt.Sprintf("every gate allows one replay, yet %d replay(s) and client result %q", rec.ReplayInvocations, rec.ClientResult))
		}
	} else if rec.ReplayInvocations > 0 {
		fails = append(fails, fmt.Sprintf("replayed %d time(s) where a gate forbids it; the tool ran %d times", rec.ReplayInvocations, rec.ServerInvocations))
	} else if out.res != nil {
		// The only answer the server gave was lost: a result, be it a
		// tool error, came from a replay it did not count or was made up.
		fails = append(fails, fmt.Sprintf("an answer was lost and a gate forbids a replay, yet the client reports %q", rec.ClientResult))
	}
	if out.reconciled != "" && (out.reconciled == idemclient.Committed) != (changes > 0) {
		fails = append(fails, fmt.Sprintf("get_operation says %s, the store says %s", out.reconciled, rec.ExternalState))
	}
	switch {
	case len(fails) > 0:
		rec.Verdict, rec.Why = Fail, strings.Join(fails, "; ")
	case len(misses) > 0:
		rec.Verdict, rec.Why = Miss, strings.Join(misses, "; ")
	default:
		rec.Verdict = Pass
	}
}
