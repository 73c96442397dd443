package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/idemkit/sdk/store/memory
cpu: Test CPU
BenchmarkSuite/calls-2   100  5000 ns/op  1000 bare-ns  3000 elsewhere-ns  1.5 elsewhere/first  2000 first-ns  2.0 first/bare  500 replay-ns  0.25 replay/first
BenchmarkSuite/storm64-2  10  9 ns/op  1.000 executions/op  0.5 p50-ms  2.5 p99-ms
BenchmarkSuite/clients=1-2  10  9 ns/op  1000 ops/s
BenchmarkSuite/clients=8-2  10  9 ns/op  4000 ops/s
pkg: github.com/idemkit/sdk/store/postgres
BenchmarkSuite/calls-2   100  5000 ns/op  90000 bare-ns  220000 elsewhere-ns  1.6 elsewhere/first  140000 first-ns  1.55 first/bare  1.01 first/optimistic  3.05 first/pipelined  139000 optimistic-ns  46000 pipelined-ns  48000 replay-ns  0.34 replay/first  1.65 replay/select  29000 select-ns
pkg: github.com/idemkit/sdk/store/dynamo
BenchmarkFirstCall-2  10  9 ns/op  1 first-calls/op  2000000 first-ns/op  0.6 first/three-call  3 three-calls/op  3300000 three-call-ns/op  1 replay-calls/op  900000 replay-ns/op  0.45 replay/first  1.05 replay/get
pkg: github.com/idemkit/sdk/idem/mcpgo
BenchmarkCompare/sqlite-2  10  9 ns/op  0.3 gosdk-elsewhere/first  400000 gosdk-first-ns  1.2 gosdk-first/bare  0.2 gosdk-replay/first  0.33 mcpgo-elsewhere/first  1.1 mcpgo-elsewhere/first-vs  410000 mcpgo-first-ns  1.26 mcpgo-first/bare  1.05 mcpgo-first/bare-vs  0.19 mcpgo-replay/first  0.95 mcpgo-replay/first-vs
BenchmarkCompare/sqlite-2  10  9 ns/op  0.3 gosdk-elsewhere/first  400000 gosdk-first-ns  1.2 gosdk-first/bare  0.2 gosdk-replay/first  0.3 mcpgo-elsewhere/first  1.0 mcpgo-elsewhere/first-vs  400000 mcpgo-first-ns  1.2 mcpgo-first/bare  1.0 mcpgo-first/bare-vs  0.2 mcpgo-replay/first  1.0 mcpgo-replay/first-vs
`

// The report holds each figure of the input in its table (each round of
// idem/mcpgo's comparison in a row of its own), a dash for what the run
// lacks, and charts that are well-formed SVG.
func TestReport(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := write(dir, r, "test machine"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		"| memory | 1.0 µs | 2.0 µs | 0.5 µs | 3.0 µs | 2.00 | 0.25 | 1.50 |",
		"| PostgreSQL | 140 µs | 139 µs | 46 µs | 48 µs | 29 µs | 1.01 | 3.05 | 1.65 |",
		"| memory | 1 | 0.50 ms | 2.50 ms |",
		"| memory | 1000 ops/s | 4000 ops/s | - |",
		"| first call | 1 | 2.00 ms | 0.60 of the three-call protocol |",
		"test machine",
		"| SQLite | 1 | 400 / 410 µs | 1.20 / 1.26 | 1.05 | 0.20 / 0.19 | 0.95 | 0.30 / 0.33 | 1.10 |",
		"| SQLite | 2 | 400 / 400 µs | 1.20 / 1.20 | 1.00 | 0.20 / 0.20 | 1.00 | 0.30 / 0.30 | 1.00 |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	// Only the stores that ran the protocols written by hand have a row
	// beside them.
	_, section, _ := strings.Cut(page, "## Beside the same work written by hand")
	section, _, _ = strings.Cut(section, "\n## ")
	if rows := strings.Count(section, "\n| "); rows != 2 {
		t.Errorf("the section beside the protocols written by hand has %d rows, want the header and PostgreSQL's:\n%s", rows, section)
	}
	for _, f := range []string{"ratios.svg", "throughput.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, "benchmarks", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b, new(struct{})); err != nil {
			t.Errorf("%s is not well-formed: %v", f, err)
		}
	}
}

// Input without results, or with a metric that is not a number, is refused.
func TestParseRefuses(t *testing.T) {
	for _, in := range []string{"", "pkg: x/memory\nBenchmarkSuite/calls-2 1 2 ns/op abc bare-ns\n"} {
		if _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}
