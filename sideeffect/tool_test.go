package sideeffect_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/sideeffect"
)

type publishIn struct {
	Slug  string `json:"slug"`
	Title string `json:"title"`
}

type publishOut struct {
	Marker string `json:"marker"`
}

type reportIn struct {
	Story string `json:"story"`
}

type reportOut struct {
	Report int `json:"report"`
}

// storyServer is a story-publishing server over the idem middleware: publish
// is keyed by slug (replace-by-key, as a model calls it); report counts a
// report (not idempotent by itself) and is protected by an op id. Both post
// after commit through a marker.
type storyServer struct {
	mu    sync.Mutex // guards posts
	posts []string   // marker keys posted, in order
}

func (ss *storyServer) post(ctx context.Context, key string, payload json.RawMessage) (string, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.posts = append(ss.posts, key)
	return "https://example.net/p/" + key, nil
}

func (ss *storyServer) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.posts)
}

func connect(t *testing.T) (*mcp.ClientSession, *storyServer, *sideeffect.Effects) {
	t.Helper()
	s, clk, fx := newStore(t)
	ss := &storyServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "stories", Version: "test"}, nil)
	guard := idem.New(s, &idem.Options{Now: clk.Now})

	idem.AddTool(srv, &mcp.Tool{Name: "publish", Description: "Publish a story and post it once."}, guard,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in publishIn) (*mcp.CallToolResult, publishOut, error) {
			if err := tx.Put(ctx, idem.Key{Collection: "stories", ID: in.Slug}, in); err != nil {
				return nil, publishOut{}, err
			}
			key := "story-post." + in.Slug
			if err := fx.Intend(ctx, tx, key, in); err != nil {
				return nil, publishOut{}, err
			}
			if err := fx.PostAfterCommit(ctx, key, ss.post, nil); err != nil {
				return nil, publishOut{}, err
			}
			if in.Title == "" { // refused after intending: the marker must roll back
				return nil, publishOut{}, errors.New("a story needs a title")
			}
			return nil, publishOut{Marker: key}, nil
		}, idem.RecordKeys("slug"))

	idem.AddTool(srv, &mcp.Tool{Name: "report", Description: "Report a story; notifies the editor."}, guard,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in reportIn) (*mcp.CallToolResult, reportOut, error) {
			k := idem.Key{Collection: "reports", ID: in.Story}
			var n int
			v, err := tx.Get(ctx, k, &n)
			switch {
			case errors.Is(err, idem.ErrNotFound):
				err = tx.Create(ctx, k, 1)
				n = 1
			case err == nil:
				n++
				err = tx.Update(ctx, k, v, n)
			}
			if err != nil {
				return nil, reportOut{}, err
			}
			key := "report-notify." + in.Story + "." + strconv.Itoa(n)
			if err := fx.Intend(ctx, tx, key, n); err != nil {
				return nil, reportOut{}, err
			}
			return nil, reportOut{Report: n}, fx.PostAfterCommit(ctx, key, ss.post, nil)
		}, idem.OpID())

	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	sess, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	cl := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "test"}, nil)
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, ss, fx
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return res
}

// Must-show 5: a repeated tool call never posts a second time: with the
// same op id (the repeat is a replay and runs no hook), and with the same
// record key without an op id (the repeat runs, finds the marker done, and
// does not post). A refused call leaves no marker and posts nothing.
func TestRepeatedToolCallPostsOnce(t *testing.T) {
	t.Run("same op id", func(t *testing.T) {
		cs, ss, _ := connect(t)
		args := map[string]any{"story": "s1", "op_id": "op-1"}
		first := call(t, cs, "report", args)
		second := call(t, cs, "report", args)
		if first.IsError || second.IsError {
			t.Fatalf("report failed: %+v / %+v", first, second)
		}
		if second.Meta[idem.MetaReplayed] != true {
			t.Errorf("second call not replayed: _meta %v", second.Meta)
		}
		if got := ss.count(); got != 1 {
			t.Errorf("the same op id posted %d times, want 1", got)
		}
		// A new op id is a new report: it posts.
		call(t, cs, "report", map[string]any{"story": "s1", "op_id": "op-2"})
		if got := ss.count(); got != 2 {
			t.Errorf("a new op id: %d posts in all, want 2", got)
		}
	})

	t.Run("same record key", func(t *testing.T) {
		cs, ss, fx := connect(t)
		args := map[string]any{"slug": "my-story", "title": "Hello"}
		for range 3 {
			if res := call(t, cs, "publish", args); res.IsError {
				t.Fatalf("publish failed: %+v", res.Content)
			}
		}
		if got := ss.count(); got != 1 {
			t.Errorf("three publish calls with one slug posted %d times, want 1", got)
		}
		m := get(t, fx, "story-post.my-story")
		if m.State != sideeffect.Done || m.Ref != "https://example.net/p/story-post.my-story" || m.Attempts != 1 {
			t.Errorf("marker %+v, want done with the post's ref after one attempt", m)
		}
	})

	t.Run("refused call", func(t *testing.T) {
		cs, ss, fx := connect(t)
		if res := call(t, cs, "publish", map[string]any{"slug": "untitled", "title": ""}); !res.IsError {
			t.Fatalf("publish without a title succeeded: %+v", res)
		}
		if got := ss.count(); got != 0 {
			t.Errorf("a refused call posted %d times", got)
		}
		if _, err := fx.Get(context.Background(), "story-post.untitled"); !errors.Is(err, sideeffect.ErrNoMarker) {
			t.Errorf("marker after a refused call: err %v, want ErrNoMarker", err)
		}
	})
}
