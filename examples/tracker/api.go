package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/sdk/idem"
)

// Issue is an issue as the tracker's API returns it (GitHub's field names),
// and as create_issue and list_issues answer it.
type Issue struct {
	Number    int       `json:"number"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	URL       string    `json:"html_url"`
	CreatedAt time.Time `json:"created_at"`
}

// Comment is a comment on an issue, as the API returns it and add_comment
// answers it.
type Comment struct {
	ID        int64     `json:"id"`
	Body      string    `json:"body"`
	URL       string    `json:"html_url"`
	CreatedAt time.Time `json:"created_at"`
}

// upstreamTimeout bounds one request to the tracker.
const upstreamTimeout = 30 * time.Second

// apiClient calls the tracker's REST API at base, GitHub's paths under
// /repos/{owner}/{name}, with token as a bearer token.
type apiClient struct {
	base  string // no trailing slash
	token string
	hc    *http.Client
}

func newAPIClient(base, token string) *apiClient {
	return &apiClient{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{Timeout: upstreamTimeout}}
}

// repoPath is the API path of repo, "owner/name" (the tools' schema has
// checked its form).
func repoPath(repo string) string {
	owner, name, _ := strings.Cut(repo, "/")
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// createIssue makes an issue: POST /repos/{owner}/{name}/issues.
func (c *apiClient) createIssue(ctx context.Context, repo, title, body string) (Issue, error) {
	var is Issue
	err := c.do(ctx, http.MethodPost, repoPath(repo)+"/issues", map[string]string{"title": title, "body": body}, &is)
	return is, err
}

// issuesSince lists the issues of repo made or changed since t, newest
// first: GET /repos/{owner}/{name}/issues.
func (c *apiClient) issuesSince(ctx context.Context, repo string, t time.Time) ([]Issue, error) {
	q := url.Values{"state": {"all"}, "sort": {"created"}, "direction": {"desc"}, "per_page": {"100"}}
	if !t.IsZero() {
		q.Set("since", t.UTC().Format(time.RFC3339))
	}
	var all []Issue
	err := c.do(ctx, http.MethodGet, repoPath(repo)+"/issues?"+q.Encode(), nil, &all)
	return all, err
}

// addComment comments on an issue: POST /repos/{owner}/{name}/issues/{number}/comments.
func (c *apiClient) addComment(ctx context.Context, repo string, number int, body string) (Comment, error) {
	var cm Comment
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", repoPath(repo), number), map[string]string{"body": body}, &cm)
	return cm, err
}

// commentsSince lists the comments on an issue made or changed since t:
// GET /repos/{owner}/{name}/issues/{number}/comments.
func (c *apiClient) commentsSince(ctx context.Context, repo string, number int, t time.Time) ([]Comment, error) {
	q := url.Values{"since": {t.UTC().Format(time.RFC3339)}, "per_page": {"100"}}
	var all []Comment
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s/issues/%d/comments?%s", repoPath(repo), number, q.Encode()), nil, &all)
	return all, err
}

// do sends one request, with the guarded call's key as Idempotency-Key,
// and decodes a 2xx answer into out. Its error says whether the request
// can have taken effect: it wraps [idem.ErrNotDone] when it certainly did
// not (never sent, or refused by the API), and is a plain error when the
// API may have acted on it (no answer, a timeout, a 5xx), which the guard
// reports as an unknown outcome. The errors quote no argument.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return idem.NotDone(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return idem.NotDone(errors.New("the tracker's request could not be made"))
	}
	// net/http sends a request that carries an Idempotency-Key again by
	// itself when a reused connection breaks before the answer begins,
	// trusting the API to honor the key; this one may not (GitHub takes
	// none). Without GetBody it cannot send the body again.
	req.GetBody = nil
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if key, ok := idem.IdempotencyKey(ctx); ok {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return sendError(method, err)
	}
	defer resp.Body.Close()
	if err := statusError(method, resp.StatusCode); err != nil {
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return unknown(method, "the tracker's answer could not be read")
	}
	return nil
}

// sendError is the error of a request that got no answer: not done when
// it was never sent (the connection was refused, the host not found),
// else unknown (a timeout or a reset may come after the API acted).
func sendError(method string, err error) error {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return idem.NotDone(errors.New("the tracker refused the connection: nothing was sent"))
	case errors.As(err, &dns):
		return idem.NotDone(errors.New("the tracker's host was not found: nothing was sent"))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.As(err, &ne) && ne.Timeout():
		return unknown(method, "the tracker did not answer in time")
	}
	return unknown(method, "the connection to the tracker broke before its answer")
}

// unknown is the error of a request that may have taken effect: a write's
// says so.
func unknown(method, msg string) error {
	if method == http.MethodGet {
		return errors.New(msg)
	}
	return errors.New(msg + ": the request may have taken effect")
}

// statusError is the error of an answer with status code, nil for 2xx. A
// 4xx says the API refused the request, so it did not happen, except 408
// (it stopped waiting, maybe after acting), 409 (a conflict, which an API
// that takes keys answers while the first request with the key is still
// running) and 429 (a limit some APIs apply after acting). A 5xx or
// anything else may come after the API acted.
func statusError(method string, code int) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		return idem.NotDone(fmt.Errorf("the tracker refused the server's token (%d %s)", code, http.StatusText(code)))
	case code == http.StatusNotFound:
		return idem.NotDone(errors.New("the tracker has no such repository or issue, or the server's token cannot see it (404 Not Found)"))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusConflict && code != http.StatusTooManyRequests:
		return idem.NotDone(fmt.Errorf("the tracker refused the request (%d %s)", code, http.StatusText(code)))
	}
	return unknown(method, fmt.Sprintf("the tracker answered %d %s", code, http.StatusText(code)))
}
