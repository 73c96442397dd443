package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Exit statuses of idem audit.
const (
	exitPass     = 0 // every tool read-only or an idempotent write, every schema accepted
	exitFindings = 1 // a problem (or, with -strict, a warning)
	exitUsage    = 2 // bad flags or arguments
	exitNoAudit  = 3 // the server could not be started, reached or listed
)

const auditUsage = `Usage:
  idem audit [flags] -- COMMAND [ARG...]   start COMMAND and talk to it over stdin/stdout
  idem audit [flags] -url URL              talk to a running server over streamable HTTP

idem audit lists the tools of an MCP server and says, for each, whether a
client may send its call again after the answer was lost. It sends
initialize and tools/list only: it calls no tool.

Each tool gets a class, from its annotations and its inputs:
  read-only             readOnlyHint: a repeat changes nothing
  idempotent write      idempotentHint: a repeat of the same arguments has no further effect
  non-idempotent write  some hint, but neither of those: a repeat may write twice
  unknown               no readOnlyHint, idempotentHint or destructiveHint at all
  conflicting           readOnlyHint with destructiveHint, or idempotentHint on a
                        tool whose op id is optional and that has no record key
It also flags schemas that strict clients reject (a boolean subschema, a root
without "type": "object"), and warns of write tools whose description says
nothing of record keys, op ids or retries, and of write tools whose only
protection is a required op id (safe for an app that keeps it, not for a
model that mints a new one to retry). The rules: docs/protect.md.

Exit status:
  0  every tool read-only or an idempotent write, every schema accepted
  1  a problem was found (or, with -strict, a warning)
  2  bad flags or arguments
  3  the server could not be started, reached or listed

Examples:
  idem audit -- go run ./examples/quickstart -stdio
  idem audit -json -- ./myserver -stdio > audit.json
  MCP_TOKEN=secret idem audit -url https://mcp.example.com/mcp -token-env MCP_TOKEN

The bearer token is read from an environment variable so that it is not in
the shell's history or the process list; idem never prints it.

Flags:
`

// auditFlags are idem audit's flags.
type auditFlags struct {
	url      string
	tokenEnv string
	json     bool
	strict   bool
	timeout  time.Duration
	command  []string
}

func runAudit(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idem audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f auditFlags
	fs.StringVar(&f.url, "url", "", "audit the server at this streamable HTTP endpoint (for example http://127.0.0.1:8080/mcp) instead of starting a command")
	fs.StringVar(&f.tokenEnv, "token-env", "", "with -url: send the bearer token held in this environment variable")
	fs.BoolVar(&f.json, "json", false, "print the audit as JSON, for machines")
	fs.BoolVar(&f.strict, "strict", false, "exit with status 1 on warnings too")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up after this long (a first \"go run\" compiles for a while)")
	fs.Usage = func() {
		io.WriteString(fs.Output(), auditUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPass
		}
		return exitUsage
	}
	f.command = fs.Args()
	if msg := f.check(); msg != "" {
		fmt.Fprintf(stderr, "idem audit: %s\nRun \"idem audit -h\" for help.\n", msg)
		return exitUsage
	}
	token := ""
	if f.tokenEnv != "" {
		if token = os.Getenv(f.tokenEnv); token == "" {
			fmt.Fprintf(stderr, "idem audit: the environment variable %s (-token-env) is empty or unset\n", f.tokenEnv)
			return exitUsage
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	var (
		src  source
		what string
	)
	if f.url != "" {
		src = httpSource(f.url, token, f.tokenEnv)
		what = redactURL(f.url)
	} else {
		src = stdioSource(f.command)
		what = strings.Join(f.command, " ")
	}
	listing, err := src.list(ctx)
	if err != nil {
		msg := err.Error()
		if token != "" {
			msg = strings.ReplaceAll(msg, token, "[token]")
		}
		if f.url != "" {
			msg = strings.ReplaceAll(msg, f.url, what)
		}
		if ctx.Err() != nil {
			msg += fmt.Sprintf(" (gave up after -timeout %v)", f.timeout)
		}
		fmt.Fprintf(stderr, "idem audit: %s: %s\n", what, msg)
		return exitNoAudit
	}
	rep := newReport(listing, src.transport, f.strict)
	if f.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idem audit: %v\n", err)
		return exitNoAudit
	}
	return rep.ExitStatus
}

// check returns what is wrong with the flags, or "".
func (f *auditFlags) check() string {
	switch {
	case f.url == "" && len(f.command) == 0:
		return "say which server: a command to start (idem audit -- COMMAND ARGS) or -url URL"
	case f.url != "" && len(f.command) > 0:
		return "give either -url or a command, not both"
	case f.tokenEnv != "" && f.url == "":
		return "-token-env goes with -url (a command started over stdio gets no bearer token)"
	case f.timeout <= 0:
		return "-timeout must be above zero"
	}
	if f.url != "" {
		u, err := url.Parse(f.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "-url must be an http:// or https:// URL, such as http://127.0.0.1:8080/mcp"
		}
	}
	return ""
}

// redactURL returns u without what may be a secret: user info, query and
// fragment.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the -url"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// stdioSource starts command and talks to it over its stdin and stdout;
// its stderr is kept for the error message when it fails.
func stdioSource(command []string) source {
	return source{transport: "stdio", connect: func(ctx context.Context) (connection, error) {
		cmd := exec.Command(command[0], command[1:]...)
		startInGroup(cmd)
		tail := &tailBuffer{max: 2048}
		cmd.Stderr = tail
		return connection{transport: commandTransport(cmd), explain: func(err error) error {
			if said := strings.TrimSpace(tail.String()); said != "" {
				return fmt.Errorf("%w; the server's last words on stderr:\n%s", err, said)
			}
			return err
		}, close: func() { endGroup(cmd, 2*time.Second) }}, nil
	}}
}

// httpSource talks to a streamable HTTP endpoint, with a bearer token if
// token is not "" (read from the environment variable tokenEnv).
func httpSource(endpoint, token, tokenEnv string) source {
	return source{transport: "http", connect: func(ctx context.Context) (connection, error) {
		rt := &bearer{token: token, base: http.DefaultTransport}
		return connection{transport: httpTransport(endpoint, &http.Client{Transport: rt}), explain: func(err error) error {
			switch code := rt.refused(); {
			case code != 0 && token == "":
				return fmt.Errorf("the server wants a bearer token (HTTP %d): put it in an environment variable and name it with -token-env", code)
			case code != 0:
				return fmt.Errorf("the server refused the bearer token (HTTP %d): check the token in $%s", code, tokenEnv)
			}
			return err
		}}, nil
	}}
}
