package exserve

import (
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A -user value needs a token and an id, and a refusal does not repeat it.
func TestUsersSet(t *testing.T) {
	u := Users{}
	for _, bad := range []string{"", "sekrit", "=alice", "sekrit="} {
		err := u.Set(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if bad != "" && strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%q: error repeats the token: %v", bad, err)
		}
	}
	if err := u.Set("tok=alice"); err != nil || u["tok"] != "alice" {
		t.Fatalf("Set(tok=alice): %v, %v", err, u)
	}
}

// With users, the endpoint refuses a request without a known token with
// 401 and a Bearer challenge (RFC 6750: error="invalid_token" when a token
// was sent); other paths answer 404 naming the endpoint.
func TestHandlerNeedsAToken(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	hs := httptest.NewServer(Handler(srv, Users{"tok": "alice"}))
	defer hs.Close()
	for tok, challenge := range map[string]string{"": `Bearer realm="mcp"`, "wrong": `Bearer realm="mcp", error="invalid_token"`} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+Path, strings.NewReader(`{}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
		if got := resp.Header.Get("WWW-Authenticate"); got != challenge {
			t.Errorf("token %q: WWW-Authenticate %q, want %q", tok, got, challenge)
		}
	}
	resp, err := http.Get(hs.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /: %d, want 404", resp.StatusCode)
	}
}

// parse runs the shared flags over args as a command named ex would.
func parse(args ...string) (*Flags, string, error) {
	var f Flags
	var out strings.Builder
	fs := f.FlagSet("ex", &out, "sqlite:ex.db", "ex -http 127.0.0.1:8080 -user TOKEN=alice")
	err := f.Parse(fs, args)
	return &f, out.String(), err
}

// Combinations that cannot work are refused before anything is opened, and
// the refusal names flags, never a value.
func TestFlagsRefuse(t *testing.T) {
	for _, args := range [][]string{
		{"-stdio", "-http", ":1"},
		{"-demo", "-http", ":1"},
		{"-demo", "-stdio"},
		{"-user", "sekrit=alice"},
		{"-http", ":1", "-user", "sekrit"},
		{"-http", ":1", "-user", "sekrit="},
		{"-http", ":1", "-max-batch", "17", "-max-calls", "16"},
		{"-http", ":1", "-max-batch", "9", "-max-calls-total", "8"},
		{"-http", ":1", "-max-calls-total", "-1"},
		{"-http", ":1", "-max-body", "-1"},
		{"-http", ":1", "-idle-timeout", "-1s"},
		{"-http", ":1", "sekrit"},
	} {
		_, out, err := parse(args...)
		if err == nil {
			t.Errorf("%q accepted", args)
		} else if strings.Contains(err.Error()+out, "sekrit") {
			t.Errorf("%q: the error repeats a value: %v %s", args, err, out)
		}
	}
}

// The limits' flags set Limits; without them, DefaultLimits.
func TestFlagsLimits(t *testing.T) {
	f, _, err := parse("-http", ":1")
	if err != nil || f.Limits != DefaultLimits() {
		t.Fatalf("no limit flags: %+v %v, want %+v", f.Limits, err, DefaultLimits())
	}
	f, _, err = parse("-http", ":1", "-max-body", "100", "-max-batch", "0", "-max-calls", "4", "-max-calls-total", "6",
		"-read-timeout", "1s", "-write-timeout", "2s", "-idle-timeout", "0")
	want := Limits{MaxBody: 100, MaxCallsPerUser: 4, MaxCallsTotal: 6, ReadTimeout: time.Second, WriteTimeout: 2 * time.Second}
	if err != nil || f.Limits != want {
		t.Fatalf("limit flags: %+v %v, want %+v", f.Limits, err, want)
	}
}

// -h shows the usage with an example line and every shared flag.
func TestFlagsHelp(t *testing.T) {
	_, out, err := parse("-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"Usage: ex [flags]", "Examples:\n  ex -http 127.0.0.1:8080 -user TOKEN=alice\n", "-store", "-http", "-stdio", "-user", "-demo", "-max-body", "-max-batch", "-max-calls", "-max-calls-total", "-read-timeout", "-write-timeout", "-idle-timeout", "docs/production.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q:\n%s", want, out)
		}
	}
}

// -demo without -store runs on a fresh SQLite file that the cleanup
// removes; with -store, on that store.
func TestDemoStore(t *testing.T) {
	f, _, err := parse("-demo")
	if err != nil {
		t.Fatal(err)
	}
	cleanup, err := f.demoStore("ex")
	if err != nil {
		t.Fatal(err)
	}
	path, ok := strings.CutPrefix(f.Store, "sqlite:")
	if !ok || !strings.Contains(path, "idemkit-ex-demo-") {
		t.Fatalf("-demo store %q, want a temporary SQLite file", f.Store)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("the demo's folder is still there: %v", err)
	}
	f, _, _ = parse("-demo", "-store", "memory:")
	if _, err := f.demoStore("ex"); err != nil || f.Store != "memory:" {
		t.Fatalf("-demo -store memory: runs on %q, %v", f.Store, err)
	}
}

// waitUntil checks cond every 5 ms until it holds; once within has passed
// without it, it fails t with the message failure returns.
func waitUntil(t testing.TB, within time.Duration, cond func() bool, failure func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(failure())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
