package interop_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/testenv"
)

// TestTrackerLostAnswer runs examples/tracker over streamable HTTP on a
// fresh SQLite store, calling a tracker API in this process (trackerAPI),
// and loses the answer to a create_issue after the server made the issue
// (a reset before any byte, or the event stream cut after the headers).
// A new client on a new connection then sends the same arguments, as a
// model does: exactly one issue reaches the API, and the resend is the
// first issue replayed, with its number and URL. It logs what each client
// raised when the answer was lost.
//
// One more subtest sends 8 identical add_comment calls at once, each on a
// connection of its own, with the go-sdk's client: one comment reaches the
// API, and all 8 get it.
func TestTrackerLostAnswer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tracker")
	if err := testenv.Build(map[string]string{bin: "../examples/tracker"}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []loss{lossReset, lossCut} {
		for _, cl := range lostAnswerClients() {
			t.Run(string(l)+"/"+cl.name(), func(t *testing.T) {
				t.Parallel()
				if _, ok := cl.(nodeClient); ok {
					needNode(t)
				}
				trackerLostAnswer(t, bin, l, cl)
			})
		}
	}
	t.Run("add_comment-8-at-once/go-sdk", func(t *testing.T) {
		t.Parallel()
		trackerCommentsAtOnce(t, bin)
	})
}

// trackerIssueArgs are the arguments of create_issue that the lost call
// and its resend send: the same repo and title, the keys the tracker
// guards the tool by.
var trackerIssueArgs = map[string]any{"repo": "acme/app", "title": "Crash on start", "body": "Since 2.3, on every start."}

// trackerLostAnswer is one subtest of TestTrackerLostAnswer: the answer to
// trackerIssueArgs lost as l says, then sent again by a new client cl.
func trackerLostAnswer(t *testing.T, bin string, l loss, cl client) {
	api := newTrackerAPI(t)
	w := newWire(t, startTracker(t, bin, api.url()))
	tg := target{transport: "http", url: w.url}
	w.loseNext("create_issue", l)

	ctx, cancel := context.WithTimeout(testContext(t), firstAttemptTimeout)
	first, err := cl.run(ctx, tg, plan{Sessions: []session{{Steps: []step{call("lost", "create_issue", trackerIssueArgs)}}}})
	cancel()
	switch o := first["lost"]; {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		t.Logf("%s, %s: no answer after %v; the call reached the server %d times", cl.name(), l, firstAttemptTimeout, w.calls("create_issue"))
	case err != nil:
		t.Fatal(err)
	case o.Error != nil:
		t.Logf("%s, %s: the client raised %q (code %v); it sent %v", cl.name(), l, o.Error.Message, o.Error.Code, w.sent())
	default:
		if r := resultOf(t, "lost", o); !r.replayed() {
			t.Fatalf("the first answer reached the client: the wire did not lose it (%v)", w.sent())
		}
		t.Logf("%s, %s: the client resent the call by itself and got the replay; it sent %v", cl.name(), l, w.sent())
	}
	if n := api.creates(); n.issues == 0 {
		t.Fatalf("no create reached the API before the answer was lost (the wire saw %v)", w.sent())
	}

	next, err := cl.run(testContext(t), tg, plan{Sessions: []session{{Steps: []step{call("resend", "create_issue", trackerIssueArgs)}}}})
	if err != nil {
		t.Fatal(err)
	}
	resend := result(t, next, "resend")
	n := api.creates().issues
	t.Logf("%s, %s: %d create(s) reached the API", cl.name(), l, n)
	if n != 1 {
		t.Errorf("%d creates reached the API for a call and its resend, want 1", n)
	}
	made := api.issues("acme/app")
	if len(made) == 0 {
		t.Fatal("the API holds no issue")
	}
	var got trackerIssue
	if err := remarshal(resend.StructuredContent, &got); err != nil {
		t.Fatalf("the resend's structured content: %v (%s)", err, resend.raw)
	}
	if resend.IsError || !resend.replayed() || got.Number != made[0].Number || got.URL != made[0].URL {
		t.Errorf("the resend answered %s, want issue #%d (%s) replayed", resend.raw, made[0].Number, made[0].URL)
	}
}

// trackerCommentsAtOnce is the subtest of 8 identical add_comment calls at
// once. The API holds the comment's create until the wire has passed all 8
// calls on, so that they overlap however fast the server is.
func trackerCommentsAtOnce(t *testing.T, bin string) {
	const n = 8
	api := newTrackerAPI(t)
	is := api.seed("acme/app", "Export is slow")
	release := api.holdComments(t)
	w := newWire(t, startTracker(t, bin, api.url()))
	tg := target{transport: "http", url: w.url}
	args := map[string]any{"repo": "acme/app", "number": is.Number, "body": "Also on Android."}

	ctx := testContext(t)
	outs, errs := make([]map[string]outcome, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outs[i], errs[i] = goSDKClient{}.run(ctx, tg, plan{Sessions: []session{{Steps: []step{call("comment", "add_comment", args)}}}})
		})
	}
	allSent := waitUntil(20*time.Second, func() bool { return w.calls("add_comment") == n })
	release()
	wg.Wait()
	if !allSent {
		t.Fatalf("the wire passed %d add_comment calls on in 20 s, want %d at once", w.calls("add_comment"), n)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	got := api.creates().comments
	t.Logf("%d identical add_comment calls at once: %d create(s) reached the API", n, got)
	if got != 1 {
		t.Errorf("%d comment creates reached the API for %d identical calls, want 1", got, n)
	}
	made := api.comments()
	if len(made) == 0 {
		t.Fatal("the API holds no comment")
	}
	ran := 0
	for i, out := range outs {
		r := result(t, out, "comment")
		var cm trackerComment
		if err := remarshal(r.StructuredContent, &cm); err != nil || r.IsError || cm.ID != made[0].ID || cm.URL != made[0].URL {
			t.Errorf("call %d answered %s, want comment %d (%s)", i, r.raw, made[0].ID, made[0].URL)
		}
		if !r.replayed() {
			ran++
		}
	}
	if ran != 1 {
		t.Errorf("%d answers not replayed, want 1 (the call that ran)", ran)
	}
}

// startTracker starts the tracker binary bin over HTTP on a fresh SQLite
// store, calling the tracker API at apiURL, and returns its endpoint.
func startTracker(t *testing.T, bin, apiURL string) string {
	t.Helper()
	return startHTTP(t, bin, "-store", "sqlite:"+filepath.Join(t.TempDir(), "tracker.db"), "-api", apiURL)
}

// waitUntil polls cond until it holds or d has passed, and reports
// whether it held.
func waitUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// trackerIssue is an issue as the tracker's API answers it (GitHub's field
// names).
type trackerIssue struct {
	Number    int       `json:"number"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	URL       string    `json:"html_url"`
	CreatedAt time.Time `json:"created_at"`
}

// trackerComment is a comment as the tracker's API answers it.
type trackerComment struct {
	ID        int64     `json:"id"`
	Body      string    `json:"body"`
	URL       string    `json:"html_url"`
	CreatedAt time.Time `json:"created_at"`
}

// trackerAPI is an issue tracker's REST API on loopback, at the paths of
// GitHub's that examples/tracker calls: POST and GET
// /repos/{owner}/{name}/issues, and POST and GET
// /repos/{owner}/{name}/issues/{number}/comments. Like GitHub it takes no
// idempotency key: a create sent twice makes two. It has one repository,
// acme/app, and counts the creates it receives.
type trackerAPI struct {
	srv  *httptest.Server
	hold chan struct{} // while open, comment creates wait (holdComments)

	mu       sync.Mutex // guards the fields below
	got      trackerCreates
	issuesOf map[string][]trackerIssue // by repo, oldest first
	byIssue  map[string][]trackerComment
	lastID   int64
}

// trackerCreates counts the creates the API received.
type trackerCreates struct{ issues, comments int }

// holdLimit bounds how long a held comment create waits.
const holdLimit = 30 * time.Second

func newTrackerAPI(t *testing.T) *trackerAPI {
	a := &trackerAPI{issuesOf: map[string][]trackerIssue{"acme/app": nil}, byIssue: map[string][]trackerComment{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /repos/{owner}/{name}/issues", a.createIssue)
	mux.HandleFunc("GET /repos/{owner}/{name}/issues", a.listIssues)
	mux.HandleFunc("POST /repos/{owner}/{name}/issues/{number}/comments", a.createComment)
	mux.HandleFunc("GET /repos/{owner}/{name}/issues/{number}/comments", a.listComments)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *trackerAPI) url() string { return a.srv.URL }

// holdComments makes comment creates wait until the returned func is
// called, or t ends, or holdLimit has passed.
func (a *trackerAPI) holdComments(t *testing.T) (release func()) {
	hold := make(chan struct{})
	a.mu.Lock()
	a.hold = hold
	a.mu.Unlock()
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	return release
}

// seed adds an issue to repo without counting it as a create.
func (a *trackerAPI) seed(repo, title string) trackerIssue {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addIssue(repo, title)
}

// addIssue makes an issue in repo; a.mu is held.
func (a *trackerAPI) addIssue(repo, title string) trackerIssue {
	is := trackerIssue{Number: len(a.issuesOf[repo]) + 1, Title: title, State: "open", CreatedAt: time.Now().UTC().Truncate(time.Second)}
	is.URL = fmt.Sprintf("%s/%s/issues/%d", a.srv.URL, repo, is.Number)
	a.issuesOf[repo] = append(a.issuesOf[repo], is)
	return is
}

func (a *trackerAPI) creates() trackerCreates {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got
}

// issues returns the issues of repo, oldest first.
func (a *trackerAPI) issues(repo string) []trackerIssue {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.issuesOf[repo])
}

// comments returns every comment, oldest first.
func (a *trackerAPI) comments() []trackerComment {
	a.mu.Lock()
	defer a.mu.Unlock()
	var all []trackerComment
	for _, cms := range a.byIssue {
		all = append(all, cms...)
	}
	slices.SortFunc(all, func(x, y trackerComment) int { return cmp.Compare(x.ID, y.ID) })
	return all
}

// repo is the repository r names, or "" when the API has none such.
func (a *trackerAPI) repo(r *http.Request) string {
	repo := r.PathValue("owner") + "/" + r.PathValue("name")
	if _, ok := a.issuesOf[repo]; !ok {
		return ""
	}
	return repo
}

func (a *trackerAPI) createIssue(w http.ResponseWriter, r *http.Request) {
	var in struct{ Title, Body string }
	decoded := json.NewDecoder(r.Body).Decode(&in) == nil
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got.issues++
	repo := a.repo(r)
	switch {
	case repo == "":
		apiAnswer(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	case !decoded || in.Title == "":
		apiAnswer(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
	default:
		apiAnswer(w, http.StatusCreated, a.addIssue(repo, in.Title))
	}
}

func (a *trackerAPI) listIssues(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	repo := a.repo(r)
	if repo == "" {
		apiAnswer(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := append([]trackerIssue{}, a.issuesOf[repo]...)
	slices.Reverse(out) // newest first
	apiAnswer(w, http.StatusOK, out)
}

func (a *trackerAPI) createComment(w http.ResponseWriter, r *http.Request) {
	var in struct{ Body string }
	decoded := json.NewDecoder(r.Body).Decode(&in) == nil
	a.mu.Lock()
	a.got.comments++
	hold := a.hold
	a.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		case <-time.After(holdLimit):
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	repo := a.repo(r)
	number, _ := strconv.Atoi(r.PathValue("number"))
	switch {
	case repo == "" || number < 1 || number > len(a.issuesOf[repo]):
		apiAnswer(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	case !decoded || in.Body == "":
		apiAnswer(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
	default:
		a.lastID++
		cm := trackerComment{ID: a.lastID, Body: in.Body, CreatedAt: time.Now().UTC().Truncate(time.Second)}
		cm.URL = fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", a.srv.URL, repo, number, cm.ID)
		key := repo + "#" + strconv.Itoa(number)
		a.byIssue[key] = append(a.byIssue[key], cm)
		apiAnswer(w, http.StatusCreated, cm)
	}
}

func (a *trackerAPI) listComments(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	repo := a.repo(r)
	if repo == "" {
		apiAnswer(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	apiAnswer(w, http.StatusOK, append([]trackerComment{}, a.byIssue[repo+"#"+r.PathValue("number")]...))
}

func apiAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
