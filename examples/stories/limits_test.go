package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// dynamoDocLimit is the largest document the DynamoDB store takes, the
// smallest limit of the stores: its item limit, 400 KB, less what it keeps
// beside the document.
const dynamoDocLimit = 400<<10 - 2<<10

// TestStoryDocumentsUnderTheLimit fills a story's documents to their caps
// with the longest values allowed, in the character that takes the most
// room once stored ('<', which encoding/json writes as six bytes): the
// reproducers with their notes, the checks, and the story's revisions.
// Each document stays under the stores' limit, and one more reproducer,
// check or revision is refused by the server's cap, not by the store.
func TestStoryDocumentsUnderTheLimit(t *testing.T) {
	s := memory.New(&memory.Options{MaxDocumentBytes: dynamoDocLimit})
	t.Cleanup(func() { s.Close() })
	social := NewSocial()
	hs := httptest.NewServer(social)
	t.Cleanup(hs.Close)
	a := newApp(s, newPoster(hs.URL), slog.New(slog.NewTextHandler(io.Discard, nil)), 0, 0)
	e := &env{t: t, name: "memory", ctx: t.Context(), store: s, social: social, a: a, srv: a.server()}
	cs := e.connect(t)
	const slug = "long"
	ok(t, e.ctx, cs, "publish_story", map[string]any{"slug": slug, "title": strings.Repeat("<", maxTitle), "body": strings.Repeat("<", maxBody)})
	handle := func(i int) string {
		h := fmt.Sprintf("@h%04d", i)
		return h + strings.Repeat("x", 65-len(h))
	}
	note := strings.Repeat("<", maxNote)
	for i := range maxReproducers {
		ok(t, e.ctx, cs, "report_reproduction", map[string]any{"slug": slug, "handle": handle(i), "note": note})
	}
	for i := range maxChecks {
		ok(t, e.ctx, cs, "report_check", map[string]any{"slug": slug, "handle": handle(i), "result": "fail"})
	}
	for _, c := range []struct {
		coll, tool, refusal string
		entries             int
		args                map[string]any
	}{
		{reprosCollection, "report_reproduction", fmt.Sprintf("at most %d reproducers", maxReproducers), maxReproducers,
			map[string]any{"slug": slug, "handle": handle(maxReproducers), "note": note}},
		{checksCollection, "report_check", fmt.Sprintf("at most %d checks", maxChecks), maxChecks,
			map[string]any{"slug": slug, "handle": handle(maxChecks), "result": "pass"}},
	} {
		n := docSize(t, s, storyKey("", c.coll, slug))
		t.Logf("%s with %d entries: %d bytes", c.coll, c.entries, n)
		if n > dynamoDocLimit {
			t.Errorf("%s is %d bytes, over %d", c.coll, n, dynamoDocLimit)
		}
		res := call(t, e.ctx, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), c.refusal) {
			t.Errorf("one more %s: %v %.200s, want a refusal saying %q", c.tool, res.Meta[idem.MetaError], text(res), c.refusal)
		}
	}

	// The story: the longest title and body, and every revision it keeps.
	body := func(i int) string { return fmt.Sprintf("%05d", i) + strings.Repeat("<", maxBody-5) }
	ok(t, e.ctx, cs, "publish_story", map[string]any{"slug": "revised", "title": strings.Repeat("<", maxTitle), "body": body(1)})
	for rev := 1; rev < maxRevisions; rev++ {
		ok(t, e.ctx, cs, "edit_story", map[string]any{"slug": "revised", "revision": rev, "body": body(rev + 1)})
	}
	n := docSize(t, s, storyKey("", storiesCollection, "revised"))
	t.Logf("a story with %d revisions and the longest title and body: %d bytes", maxRevisions, n)
	if n > dynamoDocLimit {
		t.Errorf("the story is %d bytes, over %d", n, dynamoDocLimit)
	}
	res := call(t, e.ctx, cs, "edit_story", map[string]any{"slug": "revised", "revision": maxRevisions, "body": body(0)})
	if want := fmt.Sprintf("at most %d revisions", maxRevisions); !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("one more edit_story: %v %.200s, want a refusal saying %q", res.Meta[idem.MetaError], text(res), want)
	}
}

// docSize returns the stored size of the document at k.
func docSize(t *testing.T, s idem.Store, k idem.Key) int {
	t.Helper()
	var raw json.RawMessage
	if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, &raw)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return len(raw)
}
