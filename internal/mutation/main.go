// Command mutation shows that the test suite fails when any condition the
// guarantees rest on is removed. It applies each mutation of [mutations]
// (in mutations.go), one at a time, and runs the tests named with it:
//
//	go run ./internal/mutation            # every mutation
//	go run ./internal/mutation -run flight # those whose name matches
//	go run ./internal/mutation -list
//
// The tree is never touched: the mutated file is written to a temporary
// directory and handed to go test with -overlay, so the check can run beside
// an editor or another build. A mutation is caught when its tests fail;
// the failing tests are reported. The command exits with status 1 if a
// mutation is not caught, if its original text is no longer found exactly
// once in its file (the list is stale: update it with the code), if the
// mutated code does not build, or if its run pattern matches no test.
//
// Mutations against PostgreSQL, DynamoDB Local and the Firestore emulator
// need the environment scripts/with-*.sh set (IDEMKIT_POSTGRES_URL,
// IDEMKIT_DYNAMODB_URL, IDEMKIT_FIRESTORE_EMULATOR_HOST); without it they are
// skipped, or fail the check when CI is set. scripts/mutation-check.sh runs
// the command under those scripts.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// A mutation removes or weakens one condition in one file.
type mutation struct {
	// Name identifies the mutation in reports and for -run.
	Name string
	// Guards says what the condition guarantees.
	Guards string
	// File is the file's path from the module root.
	File string
	// From is the original text, found exactly once in File; To replaces it.
	From, To string
	// Pkg is the package whose tests must fail, from the module root
	// ("./store/memory"); Run is their -run pattern, as narrow as will
	// still fail.
	Pkg, Run string
	// Needs is the environment variable of the service the tests need, or
	// "" for none.
	Needs string
}

// outcome is what running one mutation showed.
type outcome struct {
	m       mutation
	verdict string // caught, NOT caught, stale, broken, no tests, skipped, error
	tests   []string
	took    time.Duration
	output  []byte // go test's output, kept for what did not pass the check
}

func (o outcome) ok() bool { return o.verdict == "caught" || o.verdict == "skipped" }

func main() {
	run := flag.String("run", "", "only the mutations whose name matches this regular expression")
	list := flag.Bool("list", false, "list the mutations and exit")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long one mutation's tests may run")
	verbose := flag.Bool("v", false, "print go test's output for every mutation")
	parallel := flag.Int("p", 2, "how many mutations to test at once")
	flag.Parse()
	if err := check(*run, *list, *timeout, max(*parallel, 1), *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutation:", err)
		os.Exit(1)
	}
}

func check(pattern string, list bool, timeout time.Duration, parallel int, verbose bool, w io.Writer) error {
	sel, err := selectMutations(mutations, pattern)
	if err != nil {
		return err
	}
	if list {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, m := range sel {
			fmt.Fprintf(tw, "%s\t%s\t%s -run '%s'\n", m.Name, m.File, m.Pkg, m.Run)
		}
		return tw.Flush()
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "idemkit-mutation-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// Up to parallel mutations run at once; each is reported, in the
	// list's order, as soon as it and those before it are done.
	start := time.Now()
	done := make([]chan outcome, len(sel))
	slots := make(chan struct{}, parallel)
	for i := range sel {
		done[i] = make(chan outcome, 1)
	}
	go func() {
		for i, m := range sel {
			slots <- struct{}{}
			go func() {
				defer func() { <-slots }()
				done[i] <- apply(root, filepath.Join(tmp, fmt.Sprint(i)), m, timeout)
			}()
		}
	}()
	var outcomes []outcome
	for i := range sel {
		o := <-done[i]
		outcomes = append(outcomes, o)
		fmt.Fprintf(w, "%-10s %-34s %6.1fs  %s\n", o.verdict, o.m.Name, o.took.Seconds(), strings.Join(o.tests, ", "))
		if verbose || !o.ok() {
			w.Write(tail(o.output, 40))
		}
	}
	bad := 0
	for _, o := range outcomes {
		if !o.ok() {
			bad++
		}
	}
	fmt.Fprintf(w, "%d mutations, %d caught, %d skipped, %d failed the check, in %.0fs\n",
		len(outcomes), count(outcomes, "caught"), count(outcomes, "skipped"), bad, time.Since(start).Seconds())
	if bad > 0 {
		return fmt.Errorf("%d of %d mutations failed the check", bad, len(outcomes))
	}
	return nil
}

func count(os []outcome, verdict string) int {
	n := 0
	for _, o := range os {
		if o.verdict == verdict {
			n++
		}
	}
	return n
}

// selectMutations checks the list and returns the mutations whose name
// matches pattern.
func selectMutations(all []mutation, pattern string) ([]mutation, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	seen := map[string]bool{}
	var sel []mutation
	for _, m := range all {
		if m.Name == "" || m.File == "" || m.From == "" || m.From == m.To || m.Pkg == "" || m.Run == "" {
			return nil, fmt.Errorf("mutation %q: Name, File, From (unlike To), Pkg and Run are required", m.Name)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("mutation %q is listed twice", m.Name)
		}
		seen[m.Name] = true
		if re.MatchString(m.Name) {
			sel = append(sel, m)
		}
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("no mutation matches %q", pattern)
	}
	return sel, nil
}

// moduleRoot returns the directory of the go.mod of the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

// failLine matches go test -v's report of a failed test.
var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// apply runs m's tests with m applied through an overlay written in dir.
func apply(root, dir string, m mutation, timeout time.Duration) outcome {
	o := outcome{m: m}
	if m.Needs != "" && os.Getenv(m.Needs) == "" {
		if os.Getenv("CI") != "" {
			o.verdict, o.output = "error", []byte(m.Needs+" is not set: run under scripts/mutation-check.sh\n")
		} else {
			o.verdict = "skipped"
			o.tests = []string{m.Needs + " not set"}
		}
		return o
	}
	path := filepath.Join(root, filepath.FromSlash(m.File))
	src, err := os.ReadFile(path)
	if err != nil {
		o.verdict, o.output = "stale", []byte(err.Error()+"\n")
		return o
	}
	if n := bytes.Count(src, []byte(m.From)); n != 1 {
		o.verdict, o.output = "stale", fmt.Appendf(nil, "the original text is found %d times in %s, want once:\n%s\n", n, m.File, m.From)
		return o
	}
	mutated := bytes.Replace(src, []byte(m.From), []byte(m.To), 1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		o.verdict, o.output = "error", []byte(err.Error())
		return o
	}
	replacement := filepath.Join(dir, filepath.Base(path))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {path: replacement}})
	if err := errors.Join(os.WriteFile(replacement, mutated, 0o644), os.WriteFile(overlay, ov, 0o644)); err != nil {
		o.verdict, o.output = "error", []byte(err.Error())
		return o
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-overlay="+overlay, "-count=1", "-vet=off", "-v",
		"-timeout="+timeout.String(), "-run="+m.Run, m.Pkg)
	cmd.Dir = root
	start := time.Now()
	out, err := cmd.CombinedOutput()
	o.took, o.output = time.Since(start), out
	var exit *exec.ExitError
	switch {
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		o.verdict = "broken"
	case bytes.Contains(out, []byte("testing: warning: no tests to run")):
		o.verdict = "no tests"
	case err == nil:
		o.verdict = "NOT caught"
	case errors.As(err, &exit):
		o.verdict = "caught"
		o.tests = failedLeaves(out)
		if len(o.tests) == 0 {
			o.tests = []string{"(the test binary failed: " + firstLine(out, "panic:", "timed out") + ")"}
		}
	default:
		o.verdict = "error"
	}
	return o
}

// failedLeaves returns the failed tests of go test -v output that have no
// failed subtest: the cases that caught the mutation.
func failedLeaves(out []byte) []string {
	var names []string
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	var leaves []string
	for _, n := range names {
		if !slices.ContainsFunc(names, func(o string) bool { return strings.HasPrefix(o, n+"/") }) && !slices.Contains(leaves, n) {
			leaves = append(leaves, n)
		}
	}
	return leaves
}

// firstLine returns the first line of out that holds one of the markers.
func firstLine(out []byte, markers ...string) string {
	for line := range strings.Lines(string(out)) {
		for _, mk := range markers {
			if strings.Contains(line, mk) {
				return strings.TrimSpace(line)
			}
		}
	}
	return "no failed test reported"
}

// tail returns the last n lines of out.
func tail(out []byte, n int) []byte {
	lines := bytes.SplitAfter(out, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, nil)
}
