package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// auditedExamples are the example servers every tool of which must pass
// the audit. Each is built by TestMain from examples/<name>; stdio and
// http return its arguments to serve over stdin/stdout or HTTP on a free
// port, with its state in dir. Auditing another example is one more entry.
var auditedExamples = []struct {
	name        string
	stdio, http func(dir string) []string
	// want is the class of each tool; every tool must be listed.
	want map[string]class
	// warnings are the codes of the warnings a tool gets; a tool not
	// listed gets no finding.
	warnings map[string][]string
	// infos are the codes of the information findings a tool gets.
	infos map[string][]string
}{
	{
		name:  "quickstart",
		stdio: func(dir string) []string { return []string{"-stdio", "-db", filepath.Join(dir, "q.db")} },
		http:  func(dir string) []string { return []string{"-http", "127.0.0.1:0", "-db", filepath.Join(dir, "q.db")} },
		want:  map[string]class{"add_expense": classIdempotent, "set_budget": classIdempotent, "get_operation": classReadOnly},
		// add_expense is the app-caller example: an op id the app mints,
		// no record key a model has, declared for apps (idem.ForApps):
		// information, not a warning (docs/protect.md). The warning a tool
		// not so declared gets is TestOpIDOnlyWarning's.
		warnings: map[string][]string{},
		infos:    map[string][]string{"add_expense": {"op_id_only_for_apps"}},
	},
	{
		name:  "focus",
		stdio: func(dir string) []string { return []string{"-store", "sqlite:" + filepath.Join(dir, "f.db")} },
		http: func(dir string) []string {
			return []string{"-http", "127.0.0.1:0", "-store", "sqlite:" + filepath.Join(dir, "f.db")}
		},
		want: map[string]class{
			"start_focus": classIdempotent, "end_focus": classIdempotent, "delete_session": classIdempotent,
			"log_session": classIdempotent, "add_steps": classIdempotent, "set_steps": classIdempotent, "heartbeat": classIdempotent,
			"get_now": classReadOnly, "list_sessions": classReadOnly, "get_operation": classReadOnly,
		},
		// add_steps is declared for apps (idem.ForApps) beside set_steps,
		// the keyed tool for models: information, not a warning.
		warnings: map[string][]string{},
		infos:    map[string][]string{"add_steps": {"op_id_only_for_apps"}},
	},
	{
		name:  "stories",
		stdio: func(dir string) []string { return []string{"-store", "sqlite:" + filepath.Join(dir, "s.db")} },
		http: func(dir string) []string {
			return []string{"-http", "127.0.0.1:0", "-store", "sqlite:" + filepath.Join(dir, "s.db")}
		},
		want: map[string]class{
			"publish_story": classIdempotent, "report_reproduction": classIdempotent, "edit_story": classIdempotent,
			"report_check": classIdempotent, "get_story": classReadOnly, "get_operation": classReadOnly,
		},
	},
}

// TestExamplesPass audits each example server over stdio and over HTTP:
// every write tool an idempotent write, every read tool read-only, no
// problem and only the warnings listed, exit status 0.
func TestExamplesPass(t *testing.T) {
	for _, e := range auditedExamples {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(e.name+"/"+transport, func(t *testing.T) {
				var args []string
				if transport == "stdio" {
					args = append([]string{"--", bins[e.name]}, e.stdio(t.TempDir())...)
				} else {
					args = []string{"-url", startHTTP(t, bins[e.name], e.http(t.TempDir())...)}
				}
				status, r := auditJSON(t, args...)
				if status != exitPass {
					t.Errorf("exit status %d, want %d", status, exitPass)
				}
				if r.Transport != transport {
					t.Errorf("transport %q", r.Transport)
				}
				got := map[string]class{}
				warnings := 0
				for _, tool := range r.Tools {
					got[tool.Name] = tool.Class
					var codes, infos []string
					for _, f := range tool.Findings {
						switch f.Severity {
						case warning:
							codes = append(codes, f.Code)
						case info:
							infos = append(infos, f.Code)
						default:
							t.Errorf("%s: %s %s", tool.Name, f.Severity, f.Code)
						}
					}
					if !slices.Equal(infos, e.infos[tool.Name]) {
						t.Errorf("%s: information %v, want %v", tool.Name, infos, e.infos[tool.Name])
					}
					if !slices.Equal(codes, e.warnings[tool.Name]) {
						t.Errorf("%s: warnings %v, want %v", tool.Name, codes, e.warnings[tool.Name])
					}
					warnings += len(codes)
				}
				if !mapsEqual(got, e.want) {
					t.Errorf("classes %v, want %v", got, e.want)
				}
				if r.Problems != 0 || r.Warnings != warnings {
					t.Errorf("%d problems, %d warnings; want 0 and %d", r.Problems, r.Warnings, warnings)
				}
			})
		}
	}
}

func mapsEqual[K, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkUnsafe fails t unless r lists the unsafe server's tools with the
// classes and findings unsafeTools says.
func checkUnsafe(t *testing.T, r *report) {
	t.Helper()
	if r.Server.Name != "unsafe-test-server" {
		t.Errorf("server %q", r.Server.Name)
	}
	seen := map[string]bool{}
	problems := 0
	for _, tool := range r.Tools {
		want, ok := unsafeTools[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		seen[tool.Name] = true
		var codes []string
		for _, f := range tool.Findings {
			codes = append(codes, f.Code)
			if f.Severity == problem {
				problems++
			}
			if f.Message == "" {
				t.Errorf("%s: finding %s without a message", tool.Name, f.Code)
			}
		}
		if tool.Class != want.class || !slices.Equal(codes, want.codes) {
			t.Errorf("%s: %s %v, want %s %v", tool.Name, tool.Class, codes, want.class, want.codes)
		}
	}
	if len(seen) != len(unsafeTools) {
		t.Errorf("tools %v, want every one of %d", seen, len(unsafeTools))
	}
	if r.Problems != problems || problems == 0 {
		t.Errorf("report counts %d problems, the tools hold %d", r.Problems, problems)
	}
}

// TestUnsafeOverStdio audits the unsafe server started as a command (this
// test binary): every mistake listed, exit status 1.
func TestUnsafeOverStdio(t *testing.T) {
	t.Setenv(asServer, "1")
	status, r := auditJSON(t, "--", os.Args[0])
	if status != exitFindings {
		t.Errorf("exit status %d, want %d", status, exitFindings)
	}
	checkUnsafe(t, r)
}

// serveUnsafe serves the unsafe server over streamable HTTP behind a
// bearer-token check (as examples/internal/exserve.Handler does) and
// returns its endpoint and the count of tool calls it answered.
func serveUnsafe(t *testing.T, token string) (string, func() int64) {
	t.Helper()
	srv, calls := newUnsafeServer()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	h = auth.RequireBearerToken(func(ctx context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if got != token {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "u1", Expiration: time.Now().Add(time.Hour)}, nil
	}, nil)(h)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", calls.Load
}

// TestUnsafeOverHTTPWithToken audits the unsafe server over HTTP with the
// right bearer token, in the table and in JSON: the mistakes listed, exit
// status 1, no tool called, the token printed nowhere.
func TestUnsafeOverHTTPWithToken(t *testing.T) {
	const token = "tok-right-5f2a9c"
	endpoint, calls := serveUnsafe(t, token)
	t.Setenv("IDEM_TEST_TOKEN", token)

	status, r := auditJSON(t, "-url", endpoint, "-token-env", "IDEM_TEST_TOKEN")
	if status != exitFindings {
		t.Errorf("-json: exit status %d, want %d", status, exitFindings)
	}
	checkUnsafe(t, r)

	status, stdout, stderr := audit(t, "-url", endpoint, "-token-env", "IDEM_TEST_TOKEN")
	if status != exitFindings {
		t.Errorf("table: exit status %d, want %d", status, exitFindings)
	}
	for name, want := range unsafeTools {
		line := lineStarting(stdout, name+" ")
		if line == "" || !strings.Contains(line, want.class.words()) {
			t.Errorf("table row of %s %q, want class %q", name, line, want.class.words())
		}
		for _, code := range want.codes {
			if !strings.Contains(stdout, name+" ") || !strings.Contains(stdout, "["+code+"]") {
				t.Errorf("no finding line [%s] for %s", code, name)
			}
		}
	}
	if !strings.Contains(stdout, "fail: ") {
		t.Errorf("no verdict line in\n%s", stdout)
	}
	if strings.Contains(stdout+stderr, token) {
		t.Error("the token was printed")
	}
	if n := calls(); n != 0 {
		t.Errorf("the audit called %d tools", n)
	}
}

func lineStarting(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestHTTPTokenRefused audits the unsafe server with a wrong token and with
// none: a clear error, exit status 3, nothing on stdout, the token printed
// nowhere.
func TestHTTPTokenRefused(t *testing.T) {
	const wrong = "tok-wrong-81b3e0"
	endpoint, calls := serveUnsafe(t, "tok-right-5f2a9c")
	t.Setenv("IDEM_TEST_TOKEN", wrong)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong token", []string{"-url", endpoint, "-token-env", "IDEM_TEST_TOKEN"}, "refused the bearer token (HTTP 401)"},
		{"no token", []string{"-url", endpoint}, "wants a bearer token (HTTP 401)"},
		{"wrong token, json", []string{"-json", "-url", endpoint, "-token-env", "IDEM_TEST_TOKEN"}, "refused the bearer token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, stdout, stderr := audit(t, c.args...)
			if status != exitNoAudit {
				t.Errorf("exit status %d, want %d", status, exitNoAudit)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q, want %q", stderr, c.want)
			}
			if strings.Contains(stdout+stderr, wrong) {
				t.Error("the token was printed")
			}
		})
	}
	if n := calls(); n != 0 {
		t.Errorf("the audit called %d tools", n)
	}
}

// TestUsage checks the refusals of bad arguments (exit status 2) and that
// -h and help say what a newcomer needs.
func TestUsage(t *testing.T) {
	os.Unsetenv("IDEM_TEST_EMPTY")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "say which server"},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "--", "true"}, "not both"},
		{[]string{"-token-env", "X", "--", "true"}, "-token-env goes with -url"},
		{[]string{"-url", "ftp://example.com/mcp"}, "http:// or https://"},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-token-env", "IDEM_TEST_EMPTY"}, "IDEM_TEST_EMPTY (-token-env) is empty"},
		{[]string{"-timeout", "0s", "--", "true"}, "-timeout must be above zero"},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		status, stdout, stderr := audit(t, c.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("audit %q: status %d, stdout %q, stderr %q; want %d and %q", c.args, status, stdout, stderr, exitUsage, c.want)
		}
	}
	var out, errOut strings.Builder
	if status := run([]string{"help", "audit"}, &out, &errOut); status != 0 {
		t.Errorf("idem help audit: status %d", status)
	}
	for _, want := range []string{"idem audit [flags] -- COMMAND", "-url URL", "Exit status:", "-token-env", "calls no tool", "docs/protect.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("idem help audit lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if status := run(nil, &out, &errOut); status != exitUsage || !strings.Contains(errOut.String(), "audit") {
		t.Errorf("idem with no arguments: status %d, stderr %q", status, errOut.String())
	}
	if status := run([]string{"nosuch"}, &out, &errOut); status != exitUsage || !strings.Contains(errOut.String(), `no command "nosuch"`) {
		t.Errorf("idem nosuch: status %d, stderr %q", status, errOut.String())
	}
}

// TestCommand runs the idem binary that go build makes, as CI would: its
// exit status is the audit's.
func TestCommand(t *testing.T) {
	// The quickstart passes, -strict too: add_expense, declared for apps,
	// is information.
	strict := exec.Command(bins["idem"], append([]string{"audit", "-strict", "--", bins["quickstart"]}, auditedExamples[0].stdio(t.TempDir())...)...)
	out, err := strict.CombinedOutput()
	if err != nil {
		t.Fatalf("idem audit -strict on the quickstart: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\ninfo: add_expense is declared for apps") || strings.Contains(string(out), "warning:") || !strings.Contains(string(out), "\npass") {
		t.Errorf("no information on add_expense, a warning, or no pass line, in\n%s", out)
	}

	// A tool whose only protection is a required op id, not declared for
	// apps: a warning, which passes, and fails with -strict.
	warn := exec.Command(bins["idem"], "audit", "--", os.Args[0])
	warn.Env = append(os.Environ(), asOpIDOnlyServer+"=1")
	out, err = warn.CombinedOutput()
	if err != nil {
		t.Fatalf("idem audit on the op-id-only server: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\npass, with 1 warning (-strict makes them fail)\n") || !strings.Contains(string(out), "warning: append_note is a write whose only protection is a required op id") {
		t.Errorf("no warning on append_note, or no pass line, in\n%s", out)
	}
	strict = exec.Command(bins["idem"], "audit", "-strict", "--", os.Args[0])
	strict.Env = append(os.Environ(), asOpIDOnlyServer+"=1")
	out, err = strict.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFindings {
		t.Errorf("idem audit -strict on the op-id-only server: %v, want exit status %d\n%s", err, exitFindings, out)
	}

	fail := exec.Command(bins["idem"], "audit", "--", os.Args[0])
	fail.Env = append(os.Environ(), asServer+"=1")
	out, err = fail.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFindings {
		t.Fatalf("idem audit on the unsafe server: %v, want exit status %d\n%s", err, exitFindings, out)
	}
	if !strings.Contains(string(out), "append_entry") {
		t.Errorf("output does not name append_entry:\n%s", out)
	}
}
