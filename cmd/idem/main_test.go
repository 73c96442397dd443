package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/internal/testenv"
)

// asServer, set in the environment, makes the test binary serve the
// unsafe test server on stdin/stdout instead of running tests, so that the
// audit can start it as a command.
const asServer = "IDEM_AUDIT_TEST_SERVE_UNSAFE"

// bins holds the binaries TestMain builds: idem itself and the examples.
var bins = map[string]string{}

func TestMain(m *testing.M) {
	var srv *mcp.Server
	switch {
	case os.Getenv(asServer) == "1":
		srv, _ = newUnsafeServer()
	case os.Getenv(asOpIDOnlyServer) == "1":
		srv = newOpIDOnlyServer()
	}
	if srv != nil {
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	if flagIs("test.fuzzworker", "true") || (flagIs("test.run", "^$") && !flagIs("test.fuzz", "")) {
		return m.Run() // only a fuzz target runs: it needs no binaries
	}
	dir, err := os.MkdirTemp("", "idem-audit-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pkgs := map[string]string{"idem": "."}
	for _, e := range auditedExamples {
		pkgs[e.name] = "../../examples/" + e.name
	}
	builds := map[string]string{}
	for name, pkg := range pkgs {
		bins[name] = filepath.Join(dir, name)
		builds[bins[name]] = pkg
	}
	if err := testenv.Build(builds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// flagIs reports whether the test flag name is set to v.
func flagIs(name, v string) bool {
	f := flag.Lookup(name)
	return f != nil && f.Value.String() == v
}

// audit runs idem audit in this process with args and returns its exit
// status and what it printed.
func audit(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status = run(append([]string{"audit"}, args...), &out, &errOut)
	return status, out.String(), errOut.String()
}

// auditJSON runs idem audit -json with args and reads its report.
func auditJSON(t *testing.T, args ...string) (int, *report) {
	t.Helper()
	status, stdout, stderr := audit(t, append([]string{"-json"}, args...)...)
	var r report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("exit status %d, stdout %q is not a report: %v\nstderr: %s", status, stdout, err, stderr)
	}
	if r.ExitStatus != status {
		t.Errorf("report says exit status %d, the command returned %d", r.ExitStatus, status)
	}
	return status, &r
}

// startHTTP starts bin with args (which serve HTTP on a free port) and
// returns the endpoint URL it prints on stderr; the process is killed when
// t ends.
func startHTTP(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	u := testenv.Start(t, cmd).URL(30 * time.Second)
	if u == "" {
		t.Fatalf("%s printed no URL within 30 s", filepath.Base(bin))
	}
	return u
}
