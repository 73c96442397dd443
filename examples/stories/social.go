package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/sdk/sideeffect"
)

// The social service stands in for the network stories are announced on
// (Bluesky in the server this example rebuilds). It records every post it
// gets and honours the Idempotency-Key header: a second request with a key
// it has seen creates nothing and answers the first post. It counts the
// requests too, so a test can tell "posted once" from "sent twice and
// deduplicated by the network".

// A Post is one post or notification the social service recorded.
type Post struct {
	ID    string `json:"id"`
	Key   string `json:"key"`   // the Idempotency-Key it came with
	Kind  string `json:"kind"`  // announcement, reproduction or revision
	Story string `json:"story"` // the story's slug
	To    string `json:"to"`    // public, or the handle notified
	Text  string `json:"text"`
}

// SocialStats is what the social service saw.
type SocialStats struct {
	Requests int    `json:"requests"` // every POST /posts, refused or not
	Repeats  int    `json:"repeats"`  // requests with a key already recorded
	Posts    []Post `json:"posts"`
}

// Count returns how many recorded posts are of one of kinds.
func (st SocialStats) Count(kinds ...string) int {
	n := 0
	for _, p := range st.Posts {
		for _, k := range kinds {
			if p.Kind == k {
				n++
			}
		}
	}
	return n
}

// Social is the social service: an http.Handler serving POST /posts and
// GET /posts.
type Social struct {
	mu       sync.Mutex // guards the fields below
	stats    SocialStats
	byKey    map[string]int // Idempotency-Key -> index in stats.Posts
	failNext int
}

// NewSocial returns an empty social service.
func NewSocial() *Social { return &Social{byKey: map[string]int{}} }

// FailNext makes the next n POST requests fail with 503, recording nothing.
func (s *Social) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// Stats returns a copy of what the service saw.
func (s *Social) Stats() SocialStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Posts = append([]Post(nil), s.stats.Posts...)
	return st
}

func (s *Social) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/posts" {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Stats())
		return
	case http.MethodPost:
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	var p Post
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&p)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	switch {
	case s.failNext > 0:
		s.failNext--
		http.Error(w, "unavailable, try again", http.StatusServiceUnavailable)
		return
	case err != nil || key == "" || p.Kind == "" || p.To == "":
		http.Error(w, "want a JSON post with kind and to, and an Idempotency-Key header", http.StatusBadRequest)
		return
	}
	i, seen := s.byKey[key]
	if seen {
		s.stats.Repeats++
	} else {
		p.ID = fmt.Sprintf("post-%d", len(s.stats.Posts)+1)
		p.Key = key
		i = len(s.stats.Posts)
		s.byKey[key] = i
		s.stats.Posts = append(s.stats.Posts, p)
	}
	w.Header().Set("Content-Type", "application/json")
	if !seen {
		w.WriteHeader(http.StatusCreated)
	}
	json.NewEncoder(w).Encode(map[string]string{"id": s.stats.Posts[i].ID, "uri": "social:" + s.stats.Posts[i].ID})
}

// startSocial serves a new social service on a free loopback port until
// ctx is done, and returns it with its URL.
func startSocial(ctx context.Context) (*Social, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("social service: %w", err)
	}
	s := NewSocial()
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	context.AfterFunc(ctx, func() { hs.Close() })
	return s, "http://" + ln.Addr().String(), nil
}

// checkLoopback refuses a -social URL that is not http on this machine:
// the service is a local stand-in, not a network to post to.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return errors.New("-social: want http://HOST:PORT on this machine")
	}
	if h := u.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return errors.New("-social: the social service must be on loopback (127.0.0.1, ::1 or localhost)")
		}
	}
	return nil
}

// A notice is what a marker asks to be sent: one post per recipient.
type notice struct {
	Kind  string   `json:"kind"`
	Story string   `json:"story"`
	To    []string `json:"to"`
	Text  string   `json:"text"`
}

// poster sends notices to the social service.
type poster struct {
	url string // the service's base URL
	hc  *http.Client
}

func newPoster(base string) *poster {
	return &poster{url: strings.TrimSuffix(base, "/"), hc: &http.Client{Timeout: 10 * time.Second}}
}

// post is the sideeffect.PostFunc of every marker: one request per
// recipient, each with the marker key and the recipient as its
// Idempotency-Key, so a notice sent again after a partial failure reaches
// each recipient once. It returns the posts' URIs.
func (p *poster) post(ctx context.Context, key string, payload json.RawMessage) (string, error) {
	var n notice
	if err := json.Unmarshal(payload, &n); err != nil {
		return "", fmt.Errorf("social: bad notice: %w", err)
	}
	var refs []string
	for _, to := range n.To {
		body, _ := json.Marshal(Post{Kind: n.Kind, Story: n.Story, To: to, Text: n.Text})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/posts", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key+"."+to)
		resp, err := p.hc.Do(req)
		if err != nil {
			return "", err // a timeout counts as an unknown outcome (package sideeffect)
		}
		var got struct {
			URI string `json:"uri"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 || err != nil {
			// The service records nothing it refuses: the post did
			// not happen, and the marker is released.
			return "", fmt.Errorf("social: post refused with status %d", resp.StatusCode)
		}
		refs = append(refs, got.URI)
	}
	return strings.Join(refs, " "), nil
}

// reconcile is the sideeffect.ReconcileFunc: it asks the social service
// which of a notice's posts it recorded, by their idempotency keys. All of
// them: happened. Otherwise not happened: the notice is sent again, and
// the keys make the posts that did land land once.
func (p *poster) reconcile(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
	var n notice
	if err := json.Unmarshal(m.Payload, &n); err != nil {
		return sideeffect.CannotTell, "", fmt.Errorf("social: bad notice: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/posts", nil)
	if err != nil {
		return sideeffect.CannotTell, "", err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return sideeffect.CannotTell, "", err
	}
	defer resp.Body.Close()
	var st SocialStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		return sideeffect.CannotTell, "", fmt.Errorf("social: listing posts: status %d", resp.StatusCode)
	}
	uri := map[string]string{}
	for _, post := range st.Posts {
		uri[post.Key] = "social:" + post.ID
	}
	var refs []string
	for _, to := range n.To {
		r, ok := uri[m.Key+"."+to]
		if !ok {
			return sideeffect.NotHappened, "", nil
		}
		refs = append(refs, r)
	}
	return sideeffect.Happened, strings.Join(refs, " "), nil
}
