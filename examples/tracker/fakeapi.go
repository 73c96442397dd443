package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// fakeRepos are the repositories the fake tracker has.
var fakeRepos = []string{"acme/app", "acme/web"}

// fakeTracker is an issue tracker's REST API in GitHub's shape, on
// loopback: the tracker the server runs against without -api, and the one
// the demo and the tests break on purpose. Like GitHub it takes no
// idempotency key: a create sent twice makes two. It counts the requests
// it receives.
type fakeTracker struct {
	token string // the bearer token it takes
	now   func() time.Time
	mux   *http.ServeMux

	mu           sync.Mutex // guards the fields below
	repos        map[string]*fakeRepo
	faults       []fault       // how the next creates fail, in order
	searchFaults int           // the next reads to answer 503
	delay        time.Duration // how long a create takes
	got          counts
	keys         []string // the Idempotency-Key header of each create
	nextComment  int64
}

// fakeRepo is a repository's issues and their comments.
type fakeRepo struct {
	issues   []Issue
	comments map[int][]Comment // by issue number
}

// counts are the requests the fake received.
type counts struct {
	IssueCreates   int // POST .../issues
	CommentCreates int // POST .../issues/{number}/comments
	Reads          int // GET
}

// A fault is how the fake fails one create instead of making the record
// and answering 201.
type fault struct {
	create bool   // make the record first: the API acted, then failed
	status int    // then answer this status (0: 201 with the record)
	reset  bool   // then reset the connection instead of answering
	hook   func() // called once the request is counted (and the record made, with create), before the answer
}

func newFakeTracker(token string, now func() time.Time) *fakeTracker {
	f := &fakeTracker{token: token, now: now, mux: http.NewServeMux(), repos: map[string]*fakeRepo{}}
	for _, r := range fakeRepos {
		f.repos[r] = &fakeRepo{comments: map[int][]Comment{}}
	}
	f.mux.HandleFunc("POST /repos/{owner}/{name}/issues", f.createIssue)
	f.mux.HandleFunc("GET /repos/{owner}/{name}/issues", f.listIssues)
	f.mux.HandleFunc("POST /repos/{owner}/{name}/issues/{number}/comments", f.createComment)
	f.mux.HandleFunc("GET /repos/{owner}/{name}/issues/{number}/comments", f.listComments)
	return f
}

// listen serves the fake on a free loopback port and returns its base URL
// and the function that stops it.
func (f *fakeTracker) listen() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}

func (f *fakeTracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		answer(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	f.mux.ServeHTTP(w, r)
}

// failNext makes the next create fail as ft says; each call queues one.
func (f *fakeTracker) failNext(ft fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, ft)
}

// failSearches makes the next n reads answer 503.
func (f *fakeTracker) failSearches(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.searchFaults = n
}

// slow makes every create take d.
func (f *fakeTracker) slow(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// received returns the requests received so far.
func (f *fakeTracker) received() counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got
}

// issues returns the issues of repo, oldest first.
func (f *fakeTracker) issues(repo string) []Issue {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.repos[repo]; r != nil {
		return slices.Clone(r.issues)
	}
	return nil
}

// comments returns the comments on issue number of repo.
func (f *fakeTracker) comments(repo string, number int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.repos[repo]; r != nil {
		return slices.Clone(r.comments[number])
	}
	return nil
}

// idempotencyKeys returns the Idempotency-Key header of each create
// received, "" where there was none.
func (f *fakeTracker) idempotencyKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.keys)
}

// repo is the repository a request names, or nil, answered 404.
func (f *fakeTracker) repo(w http.ResponseWriter, r *http.Request) *fakeRepo {
	repo := f.repos[r.PathValue("owner")+"/"+r.PathValue("name")]
	if repo == nil {
		answer(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
	return repo
}

// write is a create: it counts the request, fails it as the next fault
// says, and otherwise makes the record with create (under the lock) and
// answers it with 201. valid checks the request's own parts first, as the
// API does before it acts.
func (f *fakeTracker) write(w http.ResponseWriter, r *http.Request, count *int, valid func() (status int, ok bool), create func() any) {
	f.mu.Lock()
	*count++
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	status, ok := valid()
	if !ok {
		f.mu.Unlock()
		answer(w, status, map[string]string{"message": http.StatusText(status)})
		return
	}
	ft := fault{create: true}
	if len(f.faults) > 0 {
		ft, f.faults = f.faults[0], f.faults[1:]
	}
	delay := f.delay
	f.mu.Unlock()

	time.Sleep(delay)
	var made any
	if ft.create {
		f.mu.Lock()
		made = create()
		f.mu.Unlock()
	}
	if ft.hook != nil {
		ft.hook()
	}
	switch {
	case ft.reset:
		resetConn(w)
	case ft.status != 0:
		answer(w, ft.status, map[string]string{"message": http.StatusText(ft.status)})
	default:
		answer(w, http.StatusCreated, made)
	}
}

func (f *fakeTracker) createIssue(w http.ResponseWriter, r *http.Request) {
	var in struct{ Title, Body string }
	decoded := json.NewDecoder(r.Body).Decode(&in) == nil
	var repo *fakeRepo
	f.write(w, r, &f.got.IssueCreates, func() (int, bool) {
		if repo = f.repos[r.PathValue("owner")+"/"+r.PathValue("name")]; repo == nil {
			return http.StatusNotFound, false
		}
		if !decoded || in.Title == "" {
			return http.StatusUnprocessableEntity, false
		}
		return 0, true
	}, func() any {
		is := Issue{Number: len(repo.issues) + 1, Title: in.Title, State: "open", CreatedAt: f.now().UTC().Truncate(time.Second)}
		is.URL = fmt.Sprintf("http://%s/%s/%s/issues/%d", r.Host, r.PathValue("owner"), r.PathValue("name"), is.Number)
		repo.issues = append(repo.issues, is)
		return is
	})
}

func (f *fakeTracker) createComment(w http.ResponseWriter, r *http.Request) {
	var in struct{ Body string }
	decoded := json.NewDecoder(r.Body).Decode(&in) == nil
	number, _ := strconv.Atoi(r.PathValue("number"))
	var repo *fakeRepo
	f.write(w, r, &f.got.CommentCreates, func() (int, bool) {
		repo = f.repos[r.PathValue("owner")+"/"+r.PathValue("name")]
		if repo == nil || number < 1 || number > len(repo.issues) {
			return http.StatusNotFound, false
		}
		if !decoded || in.Body == "" {
			return http.StatusUnprocessableEntity, false
		}
		return 0, true
	}, func() any {
		f.nextComment++
		cm := Comment{ID: f.nextComment, Body: in.Body, CreatedAt: f.now().UTC().Truncate(time.Second)}
		cm.URL = fmt.Sprintf("http://%s/%s/%s/issues/%d#issuecomment-%d", r.Host, r.PathValue("owner"), r.PathValue("name"), number, cm.ID)
		repo.comments[number] = append(repo.comments[number], cm)
		return cm
	})
}

// read counts a read, with f.mu held, and answers 503 while reads are to
// fail; repo is the repository it reads (see f.repo), since its since
// parameter.
func (f *fakeTracker) read(w http.ResponseWriter, r *http.Request) (repo *fakeRepo, since time.Time, ok bool) {
	f.got.Reads++
	if f.searchFaults > 0 {
		f.searchFaults--
		answer(w, http.StatusServiceUnavailable, map[string]string{"message": "Service Unavailable"})
		return nil, time.Time{}, false
	}
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			answer(w, http.StatusUnprocessableEntity, map[string]string{"message": "since is not a time"})
			return nil, time.Time{}, false
		}
		since = t
	}
	repo = f.repo(w, r)
	return repo, since, repo != nil
}

func (f *fakeTracker) listIssues(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo, since, ok := f.read(w, r)
	if !ok {
		return
	}
	out := []Issue{}
	for _, is := range slices.Backward(repo.issues) { // newest first
		if !is.CreatedAt.Before(since) {
			out = append(out, is)
		}
	}
	answer(w, http.StatusOK, out)
}

func (f *fakeTracker) listComments(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo, since, ok := f.read(w, r)
	if !ok {
		return
	}
	number, _ := strconv.Atoi(r.PathValue("number"))
	out := []Comment{}
	for _, cm := range repo.comments[number] {
		if !cm.CreatedAt.Before(since) {
			out = append(out, cm)
		}
	}
	answer(w, http.StatusOK, out)
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// resetConn resets the connection of w, as an API that fails mid-answer
// does: the client sees the connection break.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	conn.Close()
}
