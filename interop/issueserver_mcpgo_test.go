package interop_test

import (
	"context"
	"net/http"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	idemmcpgo "github.com/idemkit/sdk/idem/mcpgo"
)

// The issue server of issueserver_test.go, built the way mcp-go servers
// are: tools made with mcp.NewTool and registered with srv.AddTool and
// mcp-go's own raw handlers from the server's little inventory, a tool
// handler middleware of the server's own on every tool, a new
// *server.MCPServer built for every HTTP request (stateless streamable
// HTTP), and each write tool's whole effect one POST to the same REST API
// (issueAPI). The server knows nothing of idemkit but the one line in
// newMCPGoIssueServer, which takes the same settings (guardedIssueTools).

// mcpgoAPIClient is what the mcp-go handlers call the API with.
type mcpgoAPIClient struct{ apiClient }

// do sends one request as apiClient.send does and answers the tool result:
// the API's answer as text, an error result for a status of 400 or more.
func (c mcpgoAPIClient) do(ctx context.Context, method, path string, body any) (*mcpgo.CallToolResult, error) {
	text, failed, err := c.send(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if failed {
		return mcpgo.NewToolResultError(text), nil
	}
	return mcpgo.NewToolResultText(text), nil
}

// An mcpgoServerTool is a tool and the function that makes its handler.
type mcpgoServerTool struct {
	tool    mcpgo.Tool
	handler func(c mcpgoAPIClient) server.ToolHandlerFunc
}

// mcpgoIssueTools is the server's inventory: the tools of issueTools, as
// mcp-go declares them.
func mcpgoIssueTools() []mcpgoServerTool {
	post := func(path string, fields ...string) func(mcpgoAPIClient) server.ToolHandlerFunc {
		return func(c mcpgoAPIClient) server.ToolHandlerFunc {
			return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
				args := req.GetArguments()
				body := map[string]any{}
				for _, f := range fields {
					body[f] = args[f]
				}
				return c.do(ctx, http.MethodPost, path, body)
			}
		}
	}
	repo := []mcpgo.ToolOption{
		mcpgo.WithString("owner", mcpgo.Required(), mcpgo.Description("Repository owner")),
		mcpgo.WithString("repo", mcpgo.Required(), mcpgo.Description("Repository name")),
	}
	tool := func(name, desc, title string, opts ...mcpgo.ToolOption) mcpgo.Tool {
		opts = append([]mcpgo.ToolOption{mcpgo.WithDescription(desc), mcpgo.WithTitleAnnotation(title)}, append(repo, opts...)...)
		return mcpgo.NewTool(name, opts...)
	}
	return []mcpgoServerTool{
		{tool("create_issue", "Create a new issue in a repository.", "Create issue",
			mcpgo.WithString("title", mcpgo.Required(), mcpgo.Description("Issue title")),
			mcpgo.WithString("body", mcpgo.Description("Issue body"))),
			post("/issues", "owner", "repo", "title", "body")},
		{tool("add_issue_comment", "Add a comment to an issue.", "Add comment to issue",
			mcpgo.WithNumber("issue_number", mcpgo.Required(), mcpgo.Description("Issue number")),
			mcpgo.WithString("body", mcpgo.Required(), mcpgo.Description("Comment text"))),
			post("/comments", "owner", "repo", "issue_number", "body")},
		{tool("create_pull_request", "Open a pull request.", "Open pull request",
			mcpgo.WithString("title", mcpgo.Required(), mcpgo.Description("PR title")),
			mcpgo.WithString("head", mcpgo.Required(), mcpgo.Description("Branch with the changes")),
			mcpgo.WithString("base", mcpgo.Required(), mcpgo.Description("Branch to merge into"))),
			post("/pulls", "owner", "repo", "title", "head", "base")},
		{tool("list_issues", "Count the issues of a repository.", "List issues",
			mcpgo.WithReadOnlyHintAnnotation(true), mcpgo.WithDestructiveHintAnnotation(false)),
			func(c mcpgoAPIClient) server.ToolHandlerFunc {
				return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
					return c.do(ctx, http.MethodGet, "/issues", nil)
				}
			}},
	}
}

// A toolCallLog is the server's tool handler middleware: it counts every
// call that reaches it, as a logging or auth middleware sees them.
type toolCallLog struct{ toolCounts }

func (l *toolCallLog) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		l.add(req.Params.Name)
		return next(ctx, req)
	}
}

// newMCPGoIssueServer builds the server for one HTTP request. guard is
// made once, outside it (mcpgoIssueHandler); nil serves the tools
// unprotected.
//
// The guard's option comes after the server's middleware, as a line added
// at the end of the options does: the middleware sees every call, the
// resends the guard answers with a replay included, and the handlers run
// only when the guard lets a call through. (idemmcpgo is idemkit's
// idem/mcpgo, named so here because mcpgo is mcp-go's mcp package; in a
// server of its own the line reads mcpgo.Guard(guard, tools).)
func newMCPGoIssueServer(c mcpgoAPIClient, log *toolCallLog, guard *idem.Guard) *server.MCPServer {
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithToolHandlerMiddleware(log.middleware),
	}
	if guard != nil { // the test's switch, to run the server both ways
		opts = append(opts, idemmcpgo.Guard(guard, guardedIssueTools)) // the one line a server adds
	}
	srv := server.NewMCPServer("issues", "v1", opts...)
	for _, st := range mcpgoIssueTools() {
		srv.AddTool(st.tool, st.handler(c))
	}
	return srv
}

// mcpgoIssueHandler serves the mcp-go issue server over stateless
// streamable HTTP, a new server per request, in front of api; with guard,
// protected.
func mcpgoIssueHandler(api *issueAPI, log *toolCallLog, guard *idem.Guard) http.Handler {
	c := mcpgoAPIClient{apiClient{base: api.srv.URL}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.NewStreamableHTTPServer(newMCPGoIssueServer(c, log, guard), server.WithStateLess(true)).ServeHTTP(w, r)
	})
}

// mcpgoIssueServer is the mcp-go issue server as runOneLine runs it. Its
// middleware runs before the guard: it counts 2 calls of each write either
// way. The TypeScript clients must see list_issues listed exactly as the
// inventory defines it.
var mcpgoIssueServer = oneLineServer{
	serve: func(api *issueAPI, guard *idem.Guard) (http.Handler, *toolCounts) {
		log := &toolCallLog{}
		return mcpgoIssueHandler(api, log, guard), &log.toolCounts
	},
	counted:     "calls the server's middleware saw",
	wantCounted: func(bool) int { return 2 },
	listed:      func(t *testing.T, o outcome) { listedAsDefined(t, o, "list_issues") },
}
