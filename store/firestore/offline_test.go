package firestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/oprecord"
	idemfs "github.com/idemkit/sdk/store/firestore"
)

// focusSession is a focus session as the app stores it under the user.
type focusSession struct {
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end,omitempty"`
}

type endFocusIn struct {
	SessionID string    `json:"session_id"`
	EndAt     time.Time `json:"end_at"`
}

type endFocusOut struct {
	SessionID string    `json:"session_id"`
	End       time.Time `json:"end"`
}

// TestOfflineStopDeliveredTwiceLate is the offline phone: a stop queued at
// 14:05 with an op id minted on the phone reaches the server at 16:40, and
// again over a new connection after the first answer was lost. The session
// is ended once, at 14:05; the second answer is a replay of the first; and
// the op record is a document under the user's own document, beside the
// session, where the user's security rules can let the phone read it.
func TestOfflineStopDeliveredTwiceLate(t *testing.T) {
	emulatorHost(t)
	ctx := context.Background()
	day := func(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }
	now := func() time.Time { return day(16, 40) }
	const uid, opID = "uid-1", "phone-3f9a-0001"
	owners := fmt.Sprintf("offline%d_users", stores.Add(1))
	s, err := idemfs.New(newClient(t), &idemfs.Options{OwnerCollection: owners, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	sk := idem.Key{Owner: uid, Collection: "sessions", ID: "s1"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, sk, focusSession{Start: day(13, 30)})
	}); err != nil {
		t.Fatal(err)
	}

	var runs atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "focus", Version: "v0"}, nil)
	guard := idem.New(s, &idem.Options{Scope: func(context.Context, *mcp.CallToolRequest) string { return uid }, Now: now})
	idem.AddTool(srv, &mcp.Tool{Name: "end_focus", Description: "End a focus session."}, guard,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in endFocusIn) (*mcp.CallToolResult, endFocusOut, error) {
			runs.Add(1)
			k := idem.Key{Owner: uid, Collection: "sessions", ID: in.SessionID}
			var sess focusSession
			v, err := tx.Get(ctx, k, &sess)
			if err != nil {
				return nil, endFocusOut{}, err
			}
			end, err := target.EventTime(in.EndAt, sess.Start, now(), 2*time.Minute)
			if err != nil {
				return nil, endFocusOut{}, err
			}
			sess.End = &end
			if err := tx.Update(ctx, k, v, sess); err != nil {
				return nil, endFocusOut{}, err
			}
			return nil, endFocusOut{SessionID: in.SessionID, End: end}, nil
		},
		idem.RequireOpID())

	params := &mcp.CallToolParams{Name: "end_focus", Arguments: map[string]any{
		"session_id": "s1", "end_at": day(14, 5).Format(time.RFC3339), "op_id": opID}}
	call := func() *mcp.CallToolResult {
		t.Helper()
		cs, err := idemtest.Connect(ctx, srv, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("tool error: %s", mustText(res))
		}
		return res
	}
	first := call()
	_, v1, err := readSession(ctx, s, sk)
	if err != nil {
		t.Fatal(err)
	}
	second := call()

	if first.Meta[idem.MetaReplayed] == true || second.Meta[idem.MetaReplayed] != true {
		t.Errorf("replayed: first %v, second %v; want false, true", first.Meta[idem.MetaReplayed], second.Meta[idem.MetaReplayed])
	}
	if err := idemtest.SameAnswer(first, second); err != nil {
		t.Errorf("second answer: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	sess, v2, err := readSession(ctx, s, sk)
	if err != nil {
		t.Fatal(err)
	}
	if sess.End == nil || !sess.End.Equal(day(14, 5)) {
		t.Errorf("session end = %v, want 14:05 (the stop's own time, not its arrival)", sess.End)
	}
	if v2 != v1 {
		t.Errorf("session version moved from %d to %d on the replay", v1, v2)
	}
	var out endFocusOut
	if b, err := json.Marshal(first.StructuredContent); err != nil || json.Unmarshal(b, &out) != nil || !out.End.Equal(day(14, 5)) {
		t.Errorf("first answer = %v, want end 14:05", first.StructuredContent)
	}

	// The op record is users/uid-1/idem_ops/{hash}, under the same user
	// document as the session, and nowhere else.
	opKey := oprecord.Key(uid, "end_focus", opID)
	ref := s.Doc(opKey)
	want := s.Client().Collection(owners).Doc(uid).Collection(oprecord.Collection).Doc(opKey.ID)
	if ref.Path != want.Path {
		t.Errorf("op record at %s, want %s", ref.Path, want.Path)
	}
	if user := s.Doc(sk).Parent.Parent; ref.Parent.Parent == nil || ref.Parent.Parent.Path != user.Path {
		t.Errorf("op record at %s, not under the session's user %s", ref.Path, user.Path)
	}
	snap, err := want.Get(ctx)
	if err != nil {
		t.Fatalf("reading the op record at %s: %v", want.Path, err)
	}
	if _, ok := snap.Data()[idemfs.FieldDocument].(string); !ok {
		t.Errorf("op record at %s has no %q field: %v", want.Path, idemfs.FieldDocument, snap.Data())
	}
	docs, err := s.Client().CollectionGroup(oprecord.Collection).Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range docs {
		if d.Ref.ID != opKey.ID {
			continue
		}
		found++
		if d.Ref.Path != want.Path {
			t.Errorf("an op record of the call at %s, outside the user's document", d.Ref.Path)
		}
	}
	if found != 1 {
		t.Errorf("%d op records of the call, want 1", found)
	}
}

func readSession(ctx context.Context, s *idemfs.Store, k idem.Key) (focusSession, idem.Version, error) {
	var sess focusSession
	v, err := s.Read(ctx, k, &sess)
	return sess, v, err
}

func mustText(res *mcp.CallToolResult) string {
	b, _ := json.Marshal(res.Content)
	return string(b)
}
