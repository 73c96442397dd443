package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
)

// NewIssue is the input of create_issue.
type NewIssue struct {
	Repo  string `json:"repo" jsonschema:"the repository, as owner/name"`
	Title string `json:"title" jsonschema:"the issue's title"`
	Body  string `json:"body,omitempty" jsonschema:"the issue's text, in Markdown"`
}

// NewComment is the input of add_comment.
type NewComment struct {
	Repo   string `json:"repo" jsonschema:"the repository, as owner/name"`
	Number int    `json:"number" jsonschema:"the issue's number"`
	Body   string `json:"body" jsonschema:"the comment, in Markdown"`
}

// RepoQuery is the input of list_issues.
type RepoQuery struct {
	Repo string `json:"repo" jsonschema:"the repository, as owner/name"`
}

// Issues is the answer of list_issues.
type Issues struct {
	Issues []Issue `json:"issues"`
}

// The tools as the server registers them, made once: a server is built
// for every request, and the go-sdk's schema cache knows a schema by its
// pointer.
var (
	createIssueTool = &mcp.Tool{
		Name:        "create_issue",
		Description: "Create an issue in a repository of the tracker and return its number and URL.",
		InputSchema: exserve.InputSchema[NewIssue](func(p map[string]*jsonschema.Schema) {
			repoProperty(p)
			p["title"].MaxLength = new(256)
			p["body"].MaxLength = new(65536)
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(true)},
	}
	addCommentTool = &mcp.Tool{
		Name:        "add_comment",
		Description: "Comment on an issue of the tracker and return the comment's id and URL.",
		InputSchema: exserve.InputSchema[NewComment](func(p map[string]*jsonschema.Schema) {
			repoProperty(p)
			p["number"].Minimum = new(1.0)
			p["body"].MaxLength = new(65536)
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(true)},
	}
	listIssuesTool = &mcp.Tool{
		Name:        "list_issues",
		Description: "List the issues of a repository of the tracker, newest first.",
		InputSchema: exserve.InputSchema[RepoQuery](repoProperty),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(true)},
	}
)

// repoProperty says what a repository name looks like, so that the guard
// refuses any other before the handler runs (and a name cannot reach
// another path of the API).
func repoProperty(p map[string]*jsonschema.Schema) {
	p["repo"].Pattern = "^" + repoSegment + "/" + repoSegment + "$"
}

// repoSegment is an owner or a name: 1 to 100 of letters, digits, '_', '.'
// and '-', but not "." or "..", which a server reads as a step in the path
// (/repos/../user/issues is /user/issues).
const repoSegment = `(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,98}|\.\.[A-Za-z0-9_.-]{1,98})`

// addTools registers the tools the ordinary go-sdk way: the handlers know
// nothing of idemkit but the key they forward and the errors they wrap.
func (a *app) addTools(srv *mcp.Server) {
	mcp.AddTool(srv, createIssueTool, a.createIssue)
	mcp.AddTool(srv, addCommentTool, a.addComment)
	mcp.AddTool(srv, listIssuesTool, a.listIssues)
}

// guardedTools are the tools the guard protects, and how: each is keyed by
// the arguments that name what it makes, and settles an unknown outcome by
// looking for what it would have made.
func (a *app) guardedTools() idem.Tools {
	return idem.Tools{
		"create_issue": {idem.RecordKeys("repo", "title"), idem.Reconcile(a.findIssue)},
		// The body is a key too: two different comments are two
		// operations. The guard's description of the tool says the
		// trade-off: the same comment again within the TTL gets the first
		// answer.
		"add_comment": {idem.RecordKeys("repo", "number", "body"), idem.Reconcile(a.findComment)},
	}
}

// createIssue is the whole effect of create_issue: one POST. Its error
// says, through the API client, whether the issue may have been made.
func (a *app) createIssue(ctx context.Context, req *mcp.CallToolRequest, in NewIssue) (*mcp.CallToolResult, Issue, error) {
	is, err := a.api.createIssue(ctx, in.Repo, in.Title, in.Body)
	return nil, is, err
}

func (a *app) addComment(ctx context.Context, req *mcp.CallToolRequest, in NewComment) (*mcp.CallToolResult, Comment, error) {
	cm, err := a.api.addComment(ctx, in.Repo, in.Number, in.Body)
	return nil, cm, err
}

func (a *app) listIssues(ctx context.Context, req *mcp.CallToolRequest, in RepoQuery) (*mcp.CallToolResult, Issues, error) {
	all, err := a.api.issuesSince(ctx, in.Repo, time.Time{})
	if all == nil {
		all = []Issue{}
	}
	return nil, Issues{Issues: all}, err
}

// clockSlack is how far before a claim an issue found by reconcile may
// say it was made: the tracker's clock is not ours, and it writes whole
// seconds.
const clockSlack = 10 * time.Second

// findIssue settles a create_issue whose outcome is unknown: an issue with
// the title, made since the call claimed its operation, is the one it
// made. None found means it was not made, once the claim is older than
// the lease (no request of the call can still be on its way); before
// that, it cannot tell yet. An issue with the same title someone else made
// in that window would be taken for it: a tracker that takes a key, or
// lets the call tag what it makes, can tell them apart.
func (a *app) findIssue(ctx context.Context, req *mcp.CallToolRequest, p idem.Pending) (*mcp.CallToolResult, error) {
	var in NewIssue
	if err := json.Unmarshal(p.Arguments, &in); err != nil {
		return nil, err
	}
	since := p.ClaimedAt.Add(-clockSlack)
	all, err := a.api.issuesSince(ctx, in.Repo, since)
	if err != nil {
		return nil, err
	}
	for _, is := range all {
		if is.Title == in.Title && !is.CreatedAt.Before(since) {
			return structured(is)
		}
	}
	return nil, a.notFound(p)
}

// findComment settles an add_comment whose outcome is unknown, as
// findIssue does: a comment with the body, made since the claim.
func (a *app) findComment(ctx context.Context, req *mcp.CallToolRequest, p idem.Pending) (*mcp.CallToolResult, error) {
	var in NewComment
	if err := json.Unmarshal(p.Arguments, &in); err != nil {
		return nil, err
	}
	since := p.ClaimedAt.Add(-clockSlack)
	all, err := a.api.commentsSince(ctx, in.Repo, in.Number, since)
	if err != nil {
		return nil, err
	}
	for _, cm := range all {
		if cm.Body == in.Body && !cm.CreatedAt.Before(since) {
			return structured(cm)
		}
	}
	return nil, a.notFound(p)
}

// notFound is what reconcile says when the search found nothing: not done
// once the claim is older than the lease, else that it cannot tell yet.
func (a *app) notFound(p idem.Pending) error {
	if a.now().Sub(p.ClaimedAt) < a.lease {
		return errors.New("not found yet, but the call may still be under way upstream")
	}
	return idem.NotDone(errors.New("not found upstream"))
}

// structured is the result a typed handler that returned v answers:
// v as structured content, and as JSON text for older clients.
func structured(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
}
