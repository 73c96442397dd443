// Package trackertest is a fake issue tracker's REST API on loopback, for
// the tests of servers whose tools' whole effect is a call to such an API:
// POST /issues creates an issue and counts it, GET /issues lists them. Like
// GitHub's, it takes no idempotency key, so a create sent twice makes two
// issues; it records the keys it was sent, and can be told to fail.
package trackertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An Issue is what the API answers for a create, and lists.
type Issue struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	URL    string `json:"url"`
}

// A NewIssue is the body of a create. A create without a title is refused
// with 422 Unprocessable Entity, and makes nothing.
type NewIssue struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
}

// An API is the tracker, serving on loopback until the test ends.
type API struct {
	URL string // the API's base URL
	// Delay, set before the first call, is how long each create takes.
	Delay time.Duration

	mu       sync.Mutex // guards issues, keys, fail, held and holdUpTo
	issues   []Issue
	keys     []string
	fail     *failure
	held     chan struct{}
	holdUpTo int64

	posts, inFlight, maxInFlight atomic.Int64
}

type failure struct {
	status int
	create bool
}

// New starts an API for the test t.
func New(t testing.TB) *API {
	a := &API{}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// FailNext makes the next create answer status, after it made the issue
// when create is true (a create that landed, and whose answer says it
// failed).
func (a *API) FailNext(status int, create bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = &failure{status, create}
}

// Hold holds the first n creates the API receives (counting from the
// first it ever received), before each makes anything, until release is
// called, or the test ends.
func (a *API) Hold(t testing.TB, n int64) (release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := make(chan struct{})
	a.held, a.holdUpTo = held, n
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return release
}

// Posts is how many creates the API received.
func (a *API) Posts() int64 { return a.posts.Load() }

// MaxInFlight is the most creates the API served at once.
func (a *API) MaxInFlight() int64 { return a.maxInFlight.Load() }

// Created is how many issues the API made.
func (a *API) Created() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.issues)
}

// Keys are the Idempotency-Key headers of the creates the API took, in
// order ("" for none).
func (a *API) Keys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys...)
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		a.mu.Lock()
		defer a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(a.issues)
	case http.MethodPost:
		if p := a.posts.Add(1); a.heldAt(p) != nil {
			<-a.heldAt(p)
		}
		n := a.inFlight.Add(1)
		for m := a.maxInFlight.Load(); n > m && !a.maxInFlight.CompareAndSwap(m, n); m = a.maxInFlight.Load() {
		}
		time.Sleep(a.Delay)
		a.inFlight.Add(-1)
		var in NewIssue
		if json.NewDecoder(r.Body).Decode(&in) != nil || in.Title == "" {
			http.Error(w, "title required", http.StatusUnprocessableEntity)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
		f := failure{create: true}
		if a.fail != nil {
			f, a.fail = *a.fail, nil
		}
		var is Issue
		if f.create {
			is = Issue{Number: len(a.issues) + 1, Title: in.Title}
			is.URL = fmt.Sprintf("%s/issues/%d", a.URL, is.Number)
			a.issues = append(a.issues, is)
		}
		if f.status != 0 {
			http.Error(w, "upstream failed", f.status)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(is)
	}
}

// heldAt is the channel the create numbered p waits on, nil for none.
func (a *API) heldAt(p int64) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p > a.holdUpTo {
		return nil
	}
	return a.held
}
