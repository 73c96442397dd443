package interop_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/testenv"
)

// bins holds the server binaries TestMain builds once.
var bins struct {
	quickstart      string
	quickstartMCPGo string // the quickstart on mcp-go
	types           string
	focus           string
	stories         string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "idemkit-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins.quickstart = filepath.Join(dir, "quickstart")
	bins.quickstartMCPGo = filepath.Join(dir, "quickstart-mcpgo")
	bins.types = filepath.Join(dir, "typesserver")
	bins.focus = filepath.Join(dir, "focus")
	bins.stories = filepath.Join(dir, "stories")
	builds := map[string]string{bins.quickstart: "../examples/quickstart", bins.quickstartMCPGo: "../examples/quickstart-mcpgo", bins.types: "./typesserver",
		bins.focus: "../examples/focus", bins.stories: "../examples/stories"}
	if err := testenv.Build(builds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// A target is one server to connect to: a command to start per session
// (stdio) or a URL (streamable HTTP).
type target struct {
	transport string   // "stdio" or "http"
	command   []string // stdio: the server and its arguments
	url       string   // http: the endpoint
}

// newTarget returns a target for a fresh server of bin over transport,
// with args; for HTTP the server is started now and stopped when t ends.
// A stdio server is started by the client, once per session, on the same
// database.
func newTarget(t *testing.T, transport, bin string, args ...string) target {
	t.Helper()
	switch transport {
	case "stdio":
		return target{transport: "stdio", command: append([]string{bin, "-stdio"}, args...)}
	case "http":
		return target{transport: "http", url: startHTTP(t, bin, args...)}
	}
	t.Fatalf("unknown transport %q", transport)
	return target{}
}

// startHTTP starts bin serving streamable HTTP on a free loopback port and
// returns its endpoint: the URL the server prints on stderr, with the path
// it prints, or "/" when it prints none.
func startHTTP(t *testing.T, bin string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	p := testenv.Start(t, exec.Command(bin, append([]string{"-http", addr}, args...)...))
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not accept connections on %s: %v", bin, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return endpoint(addr, p.URL(time.Second))
}

// endpoint returns the URL to connect to on addr: the one the server printed
// when it names addr, with "/" for an empty path.
func endpoint(addr, printed string) string {
	if printed == "" || !strings.Contains(printed, addr) {
		return "http://" + addr + "/"
	}
	if strings.TrimPrefix(printed, "http://"+addr) == "" {
		return printed + "/"
	}
	return printed
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testContext returns a context that ends with the test or after a minute.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
