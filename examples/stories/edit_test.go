package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/sdk/idem"
)

// TestEditRevision holds edit_story to its precondition: an edit applies
// only to the revision it names; one based on a revision the story has
// moved past is answered if its body is the current one and refused
// otherwise, and one based on a revision the story never had is refused.
// Each refusal is not_saved and leaves what is stored and posted as it was.
func TestEditRevision(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		const slug = "revisions"
		cs := e.connect(t)
		ok(t, e.ctx, cs, "publish_story", map[string]any{"slug": slug, "title": "T", "body": "one"})
		ok(t, e.ctx, cs, "report_reproduction", map[string]any{"slug": slug, "handle": "@ana"})
		edit := func(rev int, body string) map[string]any {
			return map[string]any{"slug": slug, "revision": rev, "body": body}
		}
		steps := []struct {
			what    string
			args    map[string]any
			refused bool
			want    int // the revision answered
		}{
			{"on the current revision", edit(1, "two"), false, 2},
			{"its retry, the same body on the same revision", edit(1, "two"), false, 2},
			{"another body on a revision moved past", edit(1, "two, reworded"), true, 0},
			{"a revision the story never had", edit(3, "three"), true, 0},
			{"on the current revision again", edit(2, "three"), false, 3},
			{"an earlier body on a revision moved past", edit(2, "two"), true, 0},
		}
		for _, s := range steps {
			before := e.snapshot(t, cs, slug)
			res := call(t, e.ctx, cs, "edit_story", s.args)
			if s.refused {
				if !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeNotSaved) || !strings.Contains(text(res), "get_story") {
					t.Errorf("%s: %v %s, want not_saved naming get_story", s.what, res.Meta[idem.MetaError], text(res))
				}
				sameSnapshot(t, s.what, before, e.snapshot(t, cs, slug))
				continue
			}
			var got Edited
			if res.IsError || remarshal(res.StructuredContent, &got) != nil || got.Revision != s.want || got.Notified != 1 {
				t.Errorf("%s: %s, want revision %d, notified 1", s.what, text(res), s.want)
			}
		}
		v := e.view(t, cs, slug)
		if v.Revision != 3 || v.Body != "three" || e.social.Stats().Count("revision") != 2 {
			t.Errorf("after the edits: revision %d, body %q, %d revision notices; want 3, three, 2", v.Revision, v.Body, e.social.Stats().Count("revision"))
		}
	})
}

// TestEditStorm sends 8 edits based on one revision at once, each with a
// body of its own, as 8 editors (or one model's retries) would: one
// applies, the other 7 are refused as based on a revision the story moved
// past, and the reproducers are told of one revision.
func TestEditStorm(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		const slug = "edit-storm"
		cs := e.connect(t)
		ok(t, e.ctx, cs, "publish_story", map[string]any{"slug": slug, "title": "T", "body": "one"})
		ok(t, e.ctx, cs, "report_reproduction", map[string]any{"slug": slug, "handle": "@ana"})
		calls := make([]map[string]any, 8)
		for i := range calls {
			calls[i] = map[string]any{"slug": slug, "revision": 1, "body": fmt.Sprintf("edit %d", i)}
		}
		applied, refused := 0, 0
		for i, res := range e.sendAll(t, "edit_story", calls) {
			switch {
			case res == nil:
			case !res.IsError:
				applied++
			case res.Meta[idem.MetaError] == string(idem.CodeNotSaved):
				refused++
			default:
				t.Errorf("edit %d: %v %s", i, res.Meta[idem.MetaError], text(res))
			}
		}
		v := e.view(t, cs, slug)
		if applied != 1 || refused != 7 || v.Revision != 2 || e.social.Stats().Count("revision") != 1 {
			t.Errorf("%d applied, %d refused, revision %d, %d revision notices; want 1, 7, 2, 1", applied, refused, v.Revision, e.social.Stats().Count("revision"))
		}
	})
}
