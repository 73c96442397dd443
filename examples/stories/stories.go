package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/otelidem"
	"github.com/idemkit/sdk/sideeffect"
)

// The records of a story, each a document under the user's own key
// (idem.Key.Owner), so that two users' stories with one slug are two:
//
//	stories/{slug}        title, body, revisions
//	reproductions/{slug}  the set of reproducers, by handle
//	checks/{slug}         one check result per handle
//
// The reproductions and checks are documents of their own, so that a
// republish, which replaces the story's content, cannot touch them, and so
// that reports on one story do not contend with its edits.
const (
	storiesCollection = "stories"
	reprosCollection  = "reproductions"
	checksCollection  = "checks"
)

// Limits keep every document under DynamoDB's 400 KB item limit, the
// smallest of the stores', even for texts in the characters that take the
// most room once stored ('<', '>' and '&', which encoding/json writes as
// six bytes each): a story's reproducers, each with the longest note, take
// at most about 350 KB (TestStoryDocumentsUnderTheLimit).
const (
	maxTitle       = 200
	maxBody        = 20000
	maxNote        = 280
	maxReproducers = 200
	maxChecks      = 500
	maxRevisions   = 1000
)

var (
	slugPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	handlePattern = regexp.MustCompile(`^@?[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
)

// The tools' input schemas: inferred from their arguments, with the limits
// the handlers check (a slug's and a handle's form, pass or fail, a
// revision from 1, the lengths of the texts), so that a client reads them
// and the middleware refuses a value outside them (invalid_arguments)
// before the handler runs. A schema counts a text's length in characters
// and the handlers in bytes, so the handlers also refuse a text within the
// schema's length whose characters take more bytes than that.
var (
	publishSchema = exserve.InputSchema[PublishArgs](func(p props) {
		slugArg(p)
		textLength(p["title"], 1, maxTitle)
		textLength(p["body"], 1, maxBody)
	})
	reproductionSchema = exserve.InputSchema[ReproductionArgs](func(p props) {
		slugArg(p)
		p["handle"].Pattern = handlePattern.String()
		textLength(p["note"], 0, maxNote)
	})
	editSchema = exserve.InputSchema[EditArgs](func(p props) {
		slugArg(p)
		p["revision"].Minimum = new(1.0)
		textLength(p["body"], 1, maxBody)
	})
	checkSchema = exserve.InputSchema[CheckArgs](func(p props) {
		slugArg(p)
		p["handle"].Pattern = handlePattern.String()
		p["result"].Enum = []any{"pass", "fail"}
	})
	storySchema = exserve.InputSchema[StoryArgs](slugArg)
)

// props are the properties of an input schema, by argument name.
type props = map[string]*jsonschema.Schema

// slugArg states the form of the slug argument.
func slugArg(p props) { p["slug"].Pattern = slugPattern.String() }

// textLength states the length of a text argument: lo to hi characters
// (lo 0: no minimum).
func textLength(p *jsonschema.Schema, lo, hi int) {
	if lo > 0 {
		p.MinLength = &lo
	}
	p.MaxLength = &hi
}

// story is the stored content of a story.
type story struct {
	Title     string     `json:"title"`
	Body      string     `json:"body"`
	Revisions []Revision `json:"revisions"`
}

// A Revision is one version of a story's body: the first publish is
// revision 1, and every edit that changes the body adds one.
type Revision struct {
	N        int `json:"n" jsonschema:"the revision number, from 1"`
	Chars    int `json:"chars" jsonschema:"the body's length in characters"`
	Notified int `json:"notified" jsonschema:"how many reproducers this revision was sent to"`
}

type reproSet struct {
	Reproducers map[string]string `json:"reproducers"` // handle -> note
}

type checkSet struct {
	Results map[string]string `json:"results"` // handle -> result
}

// PublishArgs are the arguments of publish_story.
type PublishArgs struct {
	Slug  string `json:"slug" jsonschema:"the story's slug: 1 to 64 lowercase letters, digits or hyphens"`
	Title string `json:"title" jsonschema:"the title"`
	Body  string `json:"body" jsonschema:"the story's text"`
}

// Published is the answer of publish_story.
type Published struct {
	Slug     string `json:"slug"`
	Title    string `json:"title"`
	Revision int    `json:"revision" jsonschema:"the current revision number"`
}

// ReproductionArgs are the arguments of report_reproduction.
type ReproductionArgs struct {
	Slug   string `json:"slug" jsonschema:"the story's slug"`
	Handle string `json:"handle" jsonschema:"the handle of who reproduced it"`
	Note   string `json:"note,omitempty" jsonschema:"what they saw, up to 280 bytes of UTF-8 (280 ASCII characters); kept from the first report"`
}

// Reproduced is the answer of report_reproduction.
type Reproduced struct {
	Slug          string `json:"slug"`
	Handle        string `json:"handle"`
	Reproductions int    `json:"reproductions" jsonschema:"how many handles reproduced the story"`
}

// EditArgs are the arguments of edit_story. Revision is a precondition, not
// part of the record's name: the record is the story, named by Slug.
type EditArgs struct {
	Slug     string `json:"slug" jsonschema:"the story's slug"`
	Revision int    `json:"revision" jsonschema:"the revision the edit is based on: the current revision number from publish_story, get_story or an earlier edit_story; send the same one again when retrying"`
	Body     string `json:"body" jsonschema:"the new text"`
}

// Edited is the answer of edit_story.
type Edited struct {
	Slug     string `json:"slug"`
	Revision int    `json:"revision" jsonschema:"the current revision number"`
	Notified int    `json:"notified" jsonschema:"how many reproducers the current revision was sent to"`
}

// CheckArgs are the arguments of report_check.
type CheckArgs struct {
	Slug   string `json:"slug" jsonschema:"the story's slug"`
	Handle string `json:"handle" jsonschema:"the handle of who checked it"`
	Result string `json:"result" jsonschema:"pass or fail"`
}

// Checked is the answer of report_check.
type Checked struct {
	Slug   string `json:"slug"`
	Handle string `json:"handle"`
	Result string `json:"result"`
	Checks int    `json:"checks" jsonschema:"how many handles have a check result"`
}

// StoryArgs are the arguments of get_story.
type StoryArgs struct {
	Slug string `json:"slug" jsonschema:"the story's slug"`
}

// StoryView is the answer of get_story.
type StoryView struct {
	Slug          string        `json:"slug"`
	Title         string        `json:"title"`
	Body          string        `json:"body"`
	Revision      int           `json:"revision"`
	Revisions     []Revision    `json:"revisions"`
	Reproductions int           `json:"reproductions"`
	Reproducers   []Reproducer  `json:"reproducers"`
	Checks        []CheckResult `json:"checks"`
	Posts         []PostState   `json:"posts" jsonschema:"the announcement and the notifications, with where each stands"`
}

// A Reproducer is one handle that reproduced a story.
type Reproducer struct {
	Handle string `json:"handle"`
	Note   string `json:"note,omitempty"`
}

// A CheckResult is one handle's check of a story.
type CheckResult struct {
	Handle string `json:"handle"`
	Result string `json:"result"`
}

// A PostState is one outbound post or notification of a story.
type PostState struct {
	Kind  string `json:"kind" jsonschema:"announcement, reproduction (to the author) or revision (to the reproducers)"`
	About string `json:"about,omitempty" jsonschema:"the reproducer's handle, or the revision number"`
	To    int    `json:"to" jsonschema:"how many recipients"`
	State string `json:"state" jsonschema:"pending, claimed, unknown or done"`
	Ref   string `json:"ref,omitempty" jsonschema:"the social service's URIs, once done"`
}

// app is the server: its store, where it posts, and how often each
// handler ran (the demo prints it).
type app struct {
	store     idem.Store
	effects   *sideeffect.Effects // the post markers, in store
	social    *poster
	log       *slog.Logger
	ttl       time.Duration // how long an answer is kept and replayed (0: 24 hours)
	maxStored int64         // the bytes of answers one user keeps at once (0: no bound)
	runs      map[string]*atomic.Int64
}

func newApp(s idem.Store, social *poster, log *slog.Logger, ttl time.Duration, maxStored int64) *app {
	a := &app{store: s, effects: sideeffect.New(s, nil), social: social, log: log, ttl: ttl, maxStored: maxStored, runs: map[string]*atomic.Int64{}}
	for _, t := range []string{"publish_story", "report_reproduction", "edit_story", "report_check", "get_story"} {
		a.runs[t] = new(atomic.Int64)
	}
	return a
}

// ran returns how many times the handler of tool ran, rolled-back runs
// included.
func (a *app) ran(tool string) int64 {
	if n, ok := a.runs[tool]; ok {
		return n.Load()
	}
	return 0
}

// server returns the MCP server with the story tools and get_operation.
func (a *app) server() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-stories", Version: "v0.1.0"}, nil)
	// The server's settings, once: every tool and get_operation take them.
	guard := idem.New(a.store, &idem.Options{TTL: a.ttl, MaxStoredBytes: a.maxStored, Logger: a.log, Tracer: otelidem.NewTracer(nil)})
	opts := func(keys ...string) []idem.Option {
		return []idem.Option{idem.RecordKeys(keys...), idem.OpID()}
	}
	idem.AddTool(srv, &mcp.Tool{Name: "publish_story", Description: "Publish a story under its slug, or republish it: " +
		"a republish replaces the title and body and keeps the revisions, reproductions and checks. " +
		"The story is announced on the social service once, on its first publish.",
		InputSchema: publishSchema,
		// It replaces what was there, and posts to the social service.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)}},
		guard, a.publish, opts("slug")...)
	idem.AddTool(srv, &mcp.Tool{Name: "report_reproduction", Description: "Report that a handle reproduced a story. " +
		"One report per handle and story: a second report by the same handle changes nothing. " +
		"The author is notified once per new reproducer.",
		InputSchema: reproductionSchema,
		// It adds, and notifies the author outside the server.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(true)}},
		guard, a.reportReproduction, opts("slug", "handle")...)
	idem.AddTool(srv, &mcp.Tool{Name: "edit_story", Description: "Replace a story's body. " +
		"revision is the revision the edit is based on: the current revision number from publish_story, get_story or an earlier edit. " +
		"While the story is at that revision, the edit adds a revision and notifies each reproducer once; " +
		"a body equal to the current one writes nothing and notifies nobody. " +
		"To retry after an error or a lost answer, send the same revision: an edit that already landed is answered, never applied twice. " +
		"An edit of a story changed since that revision is refused: read it with get_story before editing again.",
		InputSchema: editSchema,
		// It replaces the body, and notifies each reproducer.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)}},
		guard, a.edit, opts("slug")...)
	idem.AddTool(srv, &mcp.Tool{Name: "report_check", Description: "Record a handle's check of a story, pass or fail. " +
		"One result per handle and story: a later report replaces it.",
		InputSchema: checkSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)}},
		guard, a.reportCheck, opts("slug", "handle")...)
	srv.AddTool(a.getStoryTool(guard))
	idem.RegisterStatusTool(srv, guard)
	return srv
}

// storyKey is the key of a story's record of user: whose records a call
// touches, the bearer token's user id (exserve.CallUser), or "" without
// one (stdio), as idem's default scope does for op ids.
func storyKey(user, coll, slug string) idem.Key {
	return idem.Key{Owner: user, Collection: coll, ID: slug}
}

// markerKey names one outbound effect of a user's story. The user id is
// written with its length, and slugs hold no dots, so two different
// (user, slug, rest) never give one key.
func markerKey(kind, user, slug, rest string) string {
	k := kind + "." + strconv.Itoa(len(user)) + "." + user + "." + slug
	if rest != "" {
		k += "." + rest
	}
	return k
}

// afterCommit posts the marker key once the call's transaction has
// committed. Every call that wrote or found the marker asks for it: a
// repeat finds it done and posts nothing, and one left pending by a failed
// post is posted now.
func (a *app) afterCommit(ctx context.Context, key, kind string) error {
	return a.effects.PostAfterCommit(ctx, key, a.social.post, func(_ string, err error) {
		if err != nil {
			a.log.Warn("a post did not go out; its marker stays open for the next call or start-up", "kind", kind, "error", err.Error())
		}
	})
}

// getDoc reads a document into dst, reporting whether it exists.
func getDoc(ctx context.Context, tx idem.Tx, k idem.Key, dst any) (idem.Version, bool, error) {
	v, err := tx.Get(ctx, k, dst)
	if errors.Is(err, idem.ErrNotFound) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// putDoc creates doc at k (v == 0) or updates it from version v.
func putDoc(ctx context.Context, tx idem.Tx, k idem.Key, v idem.Version, doc any) error {
	if v == 0 {
		return tx.Create(ctx, k, doc)
	}
	return tx.Update(ctx, k, v, doc)
}

var errNoStory = errors.New("no story with this slug: publish it first")

// readStory reads the user's story named by slug; a missing one is
// errNoStory.
func readStory(ctx context.Context, tx idem.Tx, user, slug string) (story, idem.Version, error) {
	var st story
	v, ok, err := getDoc(ctx, tx, storyKey(user, storiesCollection, slug), &st)
	if err == nil && !ok {
		err = errNoStory
	}
	return st, v, err
}

func (a *app) publish(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in PublishArgs) (*mcp.CallToolResult, Published, error) {
	a.runs["publish_story"].Add(1)
	if err := errors.Join(checkSlug(in.Slug), checkText("title", in.Title, maxTitle), checkText("body", in.Body, maxBody)); err != nil {
		return nil, Published{}, err
	}
	user := exserve.CallUser(req)
	k := storyKey(user, storiesCollection, in.Slug)
	post := markerKey("announce", user, in.Slug, "")
	var st story
	v, found, err := getDoc(ctx, tx, k, &st)
	switch {
	case err != nil:
		return nil, Published{}, err
	case !found:
		// The first publish: the story and the marker of its announcement
		// commit together, so the announcement is intended exactly when
		// the story came to be.
		st = story{Title: in.Title, Body: in.Body, Revisions: []Revision{{N: 1, Chars: utf8.RuneCountInString(in.Body)}}}
		if err := tx.Create(ctx, k, st); err != nil {
			return nil, Published{}, err
		}
		ann := notice{Kind: "announcement", Story: in.Slug, To: []string{"public"}, Text: "New story: " + in.Title}
		if err := a.effects.Intend(ctx, tx, post, ann); err != nil {
			return nil, Published{}, err
		}
	case st.Title != in.Title || st.Body != in.Body:
		// A republish replaces the content fields only: revisions,
		// reproductions and checks stay.
		st.Title, st.Body = in.Title, in.Body
		st.Revisions[len(st.Revisions)-1].Chars = utf8.RuneCountInString(in.Body)
		if err := tx.Update(ctx, k, v, st); err != nil {
			return nil, Published{}, err
		}
	}
	if err := a.afterCommit(ctx, post, "announcement"); err != nil {
		return nil, Published{}, err
	}
	return nil, Published{Slug: in.Slug, Title: st.Title, Revision: len(st.Revisions)}, nil
}

func (a *app) reportReproduction(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in ReproductionArgs) (*mcp.CallToolResult, Reproduced, error) {
	a.runs["report_reproduction"].Add(1)
	if err := errors.Join(checkSlug(in.Slug), checkHandle(in.Handle), checkNote(in.Note)); err != nil {
		return nil, Reproduced{}, err
	}
	user := exserve.CallUser(req)
	if _, _, err := readStory(ctx, tx, user, in.Slug); err != nil {
		return nil, Reproduced{}, err
	}
	k := storyKey(user, reprosCollection, in.Slug)
	set := reproSet{Reproducers: map[string]string{}}
	v, _, err := getDoc(ctx, tx, k, &set)
	if err != nil {
		return nil, Reproduced{}, err
	}
	notify := markerKey("repro", user, in.Slug, in.Handle)
	if _, known := set.Reproducers[in.Handle]; !known {
		// The count is the size of the set, and the set, its new member
		// and the author's notification commit together: a second report
		// by the handle, in parallel or later, finds it in the set.
		if len(set.Reproducers) >= maxReproducers {
			return nil, Reproduced{}, fmt.Errorf("a story takes at most %d reproducers", maxReproducers)
		}
		set.Reproducers[in.Handle] = in.Note
		if err := putDoc(ctx, tx, k, v, set); err != nil {
			return nil, Reproduced{}, err
		}
		n := notice{Kind: "reproduction", Story: in.Slug, To: []string{"author"}, Text: in.Handle + " reproduced your story"}
		if err := a.effects.Intend(ctx, tx, notify, n); err != nil {
			return nil, Reproduced{}, err
		}
	}
	if err := a.afterCommit(ctx, notify, "reproduction"); err != nil {
		return nil, Reproduced{}, err
	}
	return nil, Reproduced{Slug: in.Slug, Handle: in.Handle, Reproductions: len(set.Reproducers)}, nil
}

// errStale refuses an edit based on a revision the story has moved past.
// It names no revision: a model told the current number would resend its
// edit on it, and a retry of its own edit with a reworded body would then
// add a second revision, the very thing the precondition stops.
var errStale = errors.New("the story changed since the revision this edit is based on, perhaps by an earlier attempt of this edit: " +
	"read it with get_story before editing again")

func (a *app) edit(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in EditArgs) (*mcp.CallToolResult, Edited, error) {
	a.runs["edit_story"].Add(1)
	var bad error
	if in.Revision < 1 {
		bad = errors.New("revision must be the story's revision the edit is based on, from 1")
	}
	if err := errors.Join(checkSlug(in.Slug), bad, checkText("body", in.Body, maxBody)); err != nil {
		return nil, Edited{}, err
	}
	user := exserve.CallUser(req)
	st, v, err := readStory(ctx, tx, user, in.Slug)
	if err != nil {
		return nil, Edited{}, err
	}
	last := st.Revisions[len(st.Revisions)-1]
	switch {
	case in.Revision > last.N:
		return nil, Edited{}, errors.New("the story has no such revision: read it with get_story and edit from its current revision")
	case st.Body == in.Body:
		// An identical edit writes nothing and notifies nobody, whatever
		// revision it is based on: it is the retry of the edit that made
		// the current body, or a no-op. It only finishes a notice of the
		// current revision that a failed post left open.
		if last.Notified > 0 {
			if err := a.afterCommit(ctx, markerKey("revision", user, in.Slug, strconv.Itoa(last.N)), "revision"); err != nil {
				return nil, Edited{}, err
			}
		}
		return nil, Edited{Slug: in.Slug, Revision: last.N, Notified: last.Notified}, nil
	case in.Revision < last.N:
		// The conditional write: another body, based on a revision the
		// story has moved past. The story's version check makes it hold
		// for parallel edits too: the loser runs again and lands here.
		return nil, Edited{}, errStale
	}
	if len(st.Revisions) >= maxRevisions {
		return nil, Edited{}, fmt.Errorf("a story keeps at most %d revisions", maxRevisions)
	}
	var set reproSet
	if _, _, err := getDoc(ctx, tx, storyKey(user, reprosCollection, in.Slug), &set); err != nil {
		return nil, Edited{}, err
	}
	to := make([]string, 0, len(set.Reproducers))
	for h := range set.Reproducers {
		to = append(to, h)
	}
	slices.Sort(to)
	rev := Revision{N: last.N + 1, Chars: utf8.RuneCountInString(in.Body), Notified: len(to)}
	st.Body = in.Body
	st.Revisions = append(st.Revisions, rev)
	if err := tx.Update(ctx, storyKey(user, storiesCollection, in.Slug), v, st); err != nil {
		return nil, Edited{}, err
	}
	if len(to) > 0 {
		// One marker for the revision's notice, sent to each reproducer
		// under its own idempotency key.
		key := markerKey("revision", user, in.Slug, strconv.Itoa(rev.N))
		n := notice{Kind: "revision", Story: in.Slug, To: to, Text: fmt.Sprintf("A story you reproduced changed (revision %d)", rev.N)}
		if err := a.effects.Intend(ctx, tx, key, n); err != nil {
			return nil, Edited{}, err
		}
		if err := a.afterCommit(ctx, key, "revision"); err != nil {
			return nil, Edited{}, err
		}
	}
	return nil, Edited{Slug: in.Slug, Revision: rev.N, Notified: rev.Notified}, nil
}

func (a *app) reportCheck(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in CheckArgs) (*mcp.CallToolResult, Checked, error) {
	a.runs["report_check"].Add(1)
	var bad error
	if in.Result != "pass" && in.Result != "fail" {
		bad = errors.New("result must be pass or fail")
	}
	if err := errors.Join(checkSlug(in.Slug), checkHandle(in.Handle), bad); err != nil {
		return nil, Checked{}, err
	}
	user := exserve.CallUser(req)
	if _, _, err := readStory(ctx, tx, user, in.Slug); err != nil {
		return nil, Checked{}, err
	}
	k := storyKey(user, checksCollection, in.Slug)
	set := checkSet{Results: map[string]string{}}
	v, _, err := getDoc(ctx, tx, k, &set)
	if err != nil {
		return nil, Checked{}, err
	}
	if set.Results[in.Handle] != in.Result {
		if _, known := set.Results[in.Handle]; !known && len(set.Results) >= maxChecks {
			return nil, Checked{}, fmt.Errorf("a story takes at most %d checks", maxChecks)
		}
		set.Results[in.Handle] = in.Result
		if err := putDoc(ctx, tx, k, v, set); err != nil {
			return nil, Checked{}, err
		}
	}
	return nil, Checked{Slug: in.Slug, Handle: in.Handle, Result: in.Result, Checks: len(set.Results)}, nil
}

// getStoryTool returns get_story: the story's records, read in one
// transaction through idem (so its refusals carry codes like every tool's),
// then the state of its posts, read from their markers after that
// transaction (a marker is read in a transaction of its own).
func (a *app) getStoryTool(guard *idem.Guard) (*mcp.Tool, mcp.ToolHandler) {
	t := &mcp.Tool{Name: "get_story", Description: "Read the story named by slug: its content, revisions, reproductions, checks and the posts made. Writes nothing.",
		InputSchema: storySchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}}
	tool, read := idem.Tool(t, guard, a.readView)
	return tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := read(ctx, req)
		if err != nil || res.IsError {
			return res, err
		}
		raw, ok := res.StructuredContent.(json.RawMessage)
		var view StoryView
		if !ok || json.Unmarshal(raw, &view) != nil {
			return res, nil
		}
		if view.Posts, err = a.posts(ctx, exserve.CallUser(req), view); err != nil {
			a.log.Error("reading the markers of a story", "error", err.Error())
			return &mcp.CallToolResult{IsError: true, Meta: mcp.Meta{idem.MetaError: string(idem.CodeInternal)},
				Content: []mcp.Content{&mcp.TextContent{Text: "the story's posts could not be read; nothing was changed, retry"}}}, nil
		}
		b, _ := json.Marshal(view)
		res.StructuredContent = json.RawMessage(b)
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		return res, nil
	}
}

func (a *app) readView(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in StoryArgs) (*mcp.CallToolResult, StoryView, error) {
	a.runs["get_story"].Add(1)
	if err := checkSlug(in.Slug); err != nil {
		return nil, StoryView{}, err
	}
	user := exserve.CallUser(req)
	st, _, err := readStory(ctx, tx, user, in.Slug)
	if err != nil {
		return nil, StoryView{}, err
	}
	var repros reproSet
	var checks checkSet
	if _, _, err := getDoc(ctx, tx, storyKey(user, reprosCollection, in.Slug), &repros); err != nil {
		return nil, StoryView{}, err
	}
	if _, _, err := getDoc(ctx, tx, storyKey(user, checksCollection, in.Slug), &checks); err != nil {
		return nil, StoryView{}, err
	}
	view := StoryView{Slug: in.Slug, Title: st.Title, Body: st.Body, Revision: st.Revisions[len(st.Revisions)-1].N,
		Revisions: st.Revisions, Reproductions: len(repros.Reproducers), Reproducers: []Reproducer{}, Checks: []CheckResult{}, Posts: []PostState{}}
	for h, note := range repros.Reproducers {
		view.Reproducers = append(view.Reproducers, Reproducer{Handle: h, Note: note})
	}
	slices.SortFunc(view.Reproducers, func(x, y Reproducer) int { return cmp.Compare(x.Handle, y.Handle) })
	for h, r := range checks.Results {
		view.Checks = append(view.Checks, CheckResult{Handle: h, Result: r})
	}
	slices.SortFunc(view.Checks, func(x, y CheckResult) int { return cmp.Compare(x.Handle, y.Handle) })
	return nil, view, nil
}

// posts reads the marker of every post a story made or intends: its
// announcement, a notification per reproducer and one per revision sent to
// reproducers.
func (a *app) posts(ctx context.Context, user string, v StoryView) ([]PostState, error) {
	type want struct{ kind, about, key string }
	wants := []want{{"announcement", "", markerKey("announce", user, v.Slug, "")}}
	for _, r := range v.Reproducers {
		wants = append(wants, want{"reproduction", r.Handle, markerKey("repro", user, v.Slug, r.Handle)})
	}
	for _, r := range v.Revisions {
		if r.Notified > 0 {
			n := strconv.Itoa(r.N)
			wants = append(wants, want{"revision", n, markerKey("revision", user, v.Slug, n)})
		}
	}
	out := []PostState{}
	for _, w := range wants {
		m, err := a.effects.Get(ctx, w.key)
		if errors.Is(err, sideeffect.ErrNoMarker) {
			continue // intended by a call that has not committed yet
		}
		if err != nil {
			return nil, err
		}
		var n notice
		_ = json.Unmarshal(m.Payload, &n)
		out = append(out, PostState{Kind: w.kind, About: w.about, To: len(n.To), State: string(m.State), Ref: m.Ref})
	}
	return out, nil
}

// The checks of arguments. Their errors never quote the value.

func checkSlug(s string) error {
	if !slugPattern.MatchString(s) {
		return errors.New("slug must be 1 to 64 lowercase letters, digits or hyphens, starting with a letter or digit")
	}
	return nil
}

func checkHandle(s string) error {
	if !handlePattern.MatchString(s) {
		return errors.New("handle must be 1 to 64 letters, digits, '_', '.' or '-', optionally after '@'")
	}
	return nil
}

func checkText(name, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s must not be empty", name)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s must be valid UTF-8", name)
	case len(s) > max:
		return fmt.Errorf("%s must be at most %d bytes", name, max)
	}
	return nil
}

func checkNote(s string) error {
	if s == "" {
		return nil
	}
	return checkText("note", s, maxNote)
}
