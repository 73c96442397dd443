package storebench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// Guard measures what idem.Guard's middleware costs a server whose tool's
// whole effect is one outside call: a POST to a REST API on loopback. The
// same server, built the same way, is called through an MCP session in
// process, per iteration in turn (the order turning each iteration):
// without the middleware; through it, a first call and its repeat,
// answered from the store; and, as the anchor, with the protocol written
// by hand in the handler (a claim created in one transaction, the POST, the
// answer stored in a second; a repeat read in one), which is what the
// middleware does, less its checks and its lookup of the tool. Metrics:
// each one's median ns, and the ratios of medians first/unguarded,
// replay/unguarded, first/anchor and replay/anchor. Guard fails if a
// repeat reaches the API.
func Guard(b *testing.B, s idem.Store) {
	ctx := context.Background()
	var posts atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"number":1,"url":"https://tracker.example/issues/1"}`)
	}))
	defer api.Close()
	client := api.Client()
	type issue struct {
		Number int    `json:"number"`
		URL    string `json:"url"`
	}
	create := func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
		Title string `json:"title"`
	}) (*mcp.CallToolResult, issue, error) {
		body, _ := json.Marshal(in)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/issues", strings.NewReader(string(body)))
		if k, ok := idem.IdempotencyKey(ctx); ok {
			req.Header.Set("Idempotency-Key", k)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, issue{}, err
		}
		defer resp.Body.Close()
		var is issue
		err = json.NewDecoder(resp.Body).Decode(&is)
		return nil, is, err
	}
	// The anchor: the same handler with a claim and its answer written by
	// hand around the POST.
	type claimDoc struct {
		Done  bool  `json:"done"`
		Issue issue `json:"issue"`
	}
	byHand := func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Title string `json:"title"`
	}) (*mcp.CallToolResult, issue, error) {
		sum := sha256.Sum256([]byte(in.Title))
		k := idem.Key{Collection: "bench_claims", ID: hex.EncodeToString(sum[:])}
		var c claimDoc
		found := false
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, k, &c)
			if found = err == nil; found || !errors.Is(err, idem.ErrNotFound) {
				return err
			}
			return tx.Create(ctx, k, claimDoc{})
		}); err != nil {
			return nil, issue{}, err
		}
		if found {
			return &mcp.CallToolResult{Meta: mcp.Meta{idem.MetaReplayed: true}}, c.Issue, nil
		}
		res, is, err := create(ctx, req, in)
		if err != nil {
			return nil, is, err
		}
		err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			v, err := tx.Get(ctx, k, &c)
			if err != nil {
				return err
			}
			return tx.Update(ctx, k, v, claimDoc{Done: true, Issue: is})
		})
		return res, is, err
	}
	session := func(guard *idem.Guard, hand bool) *mcp.ClientSession {
		srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v1"}, nil)
		if hand {
			mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, byHand)
		} else {
			mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, create)
		}
		if guard != nil {
			srv.AddReceivingMiddleware(guard.Middleware(idem.Tools{"create_issue": {idem.RecordKeys("title")}}))
		}
		st, ct := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	plain, guarded, anchor := session(nil, false), session(idem.New(s, nil), false), session(nil, true)
	call := func(cs *mcp.ClientSession, title string) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: map[string]any{"title": title}})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("tool error: %v", res.Content)
		}
		return res
	}
	var plainT, firstT, replayT, handT, handReplayT []time.Duration
	round := func(it int, timed bool) {
		title := "issue " + strconv.FormatInt(benchSeq.Add(1), 10)
		timeOne := func(f func()) time.Duration { t := time.Now(); f(); return time.Since(t) }
		firstAndRepeat := func(cs *mcp.ClientSession) (first, repeat time.Duration) {
			first = timeOne(func() { call(cs, title) })
			before := posts.Load()
			repeat = timeOne(func() {
				if res := call(cs, title); res.Meta[idem.MetaReplayed] != true {
					b.Fatal("a repeat was not replayed")
				}
			})
			if posts.Load() != before {
				b.Fatal("a repeat reached the API")
			}
			return first, repeat
		}
		var p, f, r, h, hr time.Duration
		steps := []func(){
			func() { p = timeOne(func() { call(plain, title) }) },
			func() { f, r = firstAndRepeat(guarded) },
			func() { h, hr = firstAndRepeat(anchor) },
		}
		for j := range steps {
			steps[(it+j)%len(steps)]()
		}
		if timed {
			plainT, firstT, replayT = append(plainT, p), append(firstT, f), append(replayT, r)
			handT, handReplayT = append(handT, h), append(handReplayT, hr)
		}
	}
	for it := range benchWarmups {
		round(it, false)
	}
	n := 0
	for b.Loop() {
		round(n, true)
		n++
	}
	med := func(ds []time.Duration) float64 { return float64(pct(ds, 0.5)) }
	pm, fm, rm, hm, hrm := med(plainT), med(firstT), med(replayT), med(handT), med(handReplayT)
	b.ReportMetric(pm, "unguarded-ns")
	b.ReportMetric(fm, "first-ns")
	b.ReportMetric(rm, "replay-ns")
	b.ReportMetric(hm, "anchor-first-ns")
	b.ReportMetric(hrm, "anchor-replay-ns")
	b.ReportMetric(fm/pm, "first/unguarded")
	b.ReportMetric(rm/pm, "replay/unguarded")
	b.ReportMetric(fm/hm, "first/anchor")
	b.ReportMetric(rm/hrm, "replay/anchor")
}
