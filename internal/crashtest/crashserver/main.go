// Command crashserver is the server the crash test of package crashtest
// kills: an MCP server over streamable HTTP (stateless) with one tool,
// append, that adds an entry to a log under the log's next number and
// requires an op id. The test runs the same code (crashtest.Serve) in a
// process of its own.
//
//	crashserver -store sqlite:/tmp/c.db -http 127.0.0.1:0
//	crashserver -store postgres://... -listen-fd 3 -kill written:4
//
// -kill POINT:CALL makes the process kill itself with SIGKILL at POINT
// (start, written or committed) of the first handler run from the CALL-th
// on that reaches it. With
// -listen-fd it serves on a listening socket it inherits, which the test
// keeps open across restarts, so that calls sent while no server runs wait
// for the next one. -unsafe registers the tool without op ids, to show that
// the crash test then finds duplicates.
//
// It prints "crashserver: ready URL" on stderr once it serves, and exits 0
// on SIGINT or SIGTERM.
package main

import (
	"fmt"
	"os"

	"github.com/idemkit/sdk/internal/crashtest"
)

func main() {
	if err := crashtest.Serve(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "crashserver:", err)
		os.Exit(1)
	}
}
