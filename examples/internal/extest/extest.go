// Package extest is what the example servers' tests share: running an
// example's command as a process of its own and reading what it prints,
// a client's HTTP transport with a bearer token, and reading tools/list
// as a client does. The checks both quickstarts pass, whichever MCP
// library serves them, are here too.
package extest

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/testenv"
)

// RunTimeout bounds how long [Run] and [Output] wait for a command.
const RunTimeout = time.Minute

// Main runs the tests of m and removes bins once they are done. With the
// environment variable asMain set to 1 (see [AsMain]), the test binary is
// the command instead: it runs run on its arguments and exits with its
// status, so that a test can start the command as a process of its own
// without building it. asMain "" leaves that out.
func Main(m *testing.M, asMain string, run func(args []string, stdout, stderr io.Writer) int, bins ...*testenv.Binary) {
	if asMain != "" && os.Getenv(asMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	for _, b := range bins {
		b.Remove()
	}
	os.Exit(code)
}

// AsMain returns the test binary as the command, run with args: [Main]
// with asMain runs the command in it.
func AsMain(asMain string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = AsMainEnv(asMain)
	return cmd
}

// AsMainEnv is this process's environment with asMain set to 1, for a
// client that starts the test binary as the command itself.
func AsMainEnv(asMain string) []string {
	return append(os.Environ(), asMain+"=1")
}

// Run runs cmd to its end and returns its exit status and what it wrote on
// stdout and stderr. It fails t when cmd does not start, or is still
// running after RunTimeout (it is killed then).
func Run(t testing.TB, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	late := time.AfterFunc(RunTimeout, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !late.Stop() {
		t.Fatalf("%v still running after %v; stderr: %s", cmd.Args, RunTimeout, errOut.String())
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// Output runs cmd as [Run] does and returns what it wrote on stdout; it
// fails t when cmd exits with a status other than 0, showing its stderr.
func Output(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	code, stdout, stderr := Run(t, cmd)
	if code != 0 {
		t.Fatalf("%v: exit status %d; stderr: %q", cmd.Args, code, stderr)
	}
	return stdout
}

// EmptyDir fails t when dir holds anything, such as what a demo should not
// have left in its folder.
func EmptyDir(t testing.TB, dir string) {
	t.Helper()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%v left in %s", left, dir)
	}
}

// BearerClient returns an HTTP client that sends the bearer token tok on
// every request.
func BearerClient(tok string) *http.Client {
	return &http.Client{Transport: bearer(tok)}
}

// bearer adds a bearer token to every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
