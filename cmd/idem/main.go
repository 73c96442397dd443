// Command idem checks that the tools of an MCP server are safe to call
// twice.
//
//	go install ./cmd/idem                              # from a checkout of idemkit
//	idem audit -- go run ./examples/quickstart -stdio  # a server started over stdio
//	idem audit -url http://127.0.0.1:8080/mcp          # a server over streamable HTTP
//	idem canary                                        # the post-commit-disconnect matrix, safe-retry client
//	idem help audit                                    # what audit checks, its flags, exit status
//
// Each subcommand is a function with the signature of [subcommands]' values:
// it parses its own arguments and returns the process's exit status.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/idemkit/sdk/cmd/idem/internal/canary"
)

// A subcommand is one "idem NAME": run parses args (what follows NAME) and
// returns the exit status; summary is its line in "idem help".
type subcommand struct {
	run     func(args []string, stdout, stderr io.Writer) int
	summary string
}

var subcommands = map[string]subcommand{
	"audit":  {runAudit, "list a server's tools and say which a client may safely send twice (calls no tool)"},
	"canary": {canary.Main, "run the post-commit-disconnect matrix against a client policy"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			usage(stdout)
			return 0
		}
		if sc, ok := subcommands[rest[0]]; ok {
			return sc.run([]string{"-h"}, stdout, stdout)
		}
		fmt.Fprintf(stderr, "idem help: no command %q\n\n", rest[0])
		usage(stderr)
		return 2
	}
	sc, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(stderr, "idem: no command %q\n\n", name)
		usage(stderr)
		return 2
	}
	return sc.run(rest, stdout, stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(subcommands))
	width := len("help")
	for name := range subcommands {
		names = append(names, name)
		width = max(width, len(name))
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("idem checks that the tools of an MCP server are safe to call twice.\n\n")
	b.WriteString("Usage:\n  idem <command> [arguments]\n\nCommands:\n")
	for _, name := range names {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, name, subcommands[name].summary)
	}
	fmt.Fprintf(&b, "  %-*s  %s\n", width, "help", "print this, or a command's help: idem help audit")
	b.WriteString("\nRun \"idem help <command>\" (or \"idem <command> -h\") for its flags and exit status.\n")
	io.WriteString(w, b.String())
}
