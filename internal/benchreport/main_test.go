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

// report writes the report of the benchmark output in into a temporary
// folder and returns the folder and the page.
func report(t *testing.T, in string) (dir, page string) {
	t.Helper()
	r, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := write(dir, r, "test machine"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, string(b)
}

// The report holds each figure of the input in its table (each round of
// idem/mcpgo's comparison in a row of its own), a dash for what the run
// lacks, and charts that are well-formed SVG; a run without
// BenchmarkFlood has no section for it.
func TestReport(t *testing.T) {
	dir, page := report(t, sample)
	for _, want := range []string{
		"| memory | 1.0 µs | 2.0 µs | 0.5 µs | 3.0 µs | 2.00 | 0.25 | 1.50 |",
		"| PostgreSQL | 140 µs | 139 µs | 46 µs | 48 µs | 29 µs | 1.01 | 3.05 | 1.65 |",
		"| memory | 1 | 0.50 ms | 2.50 ms |",
		"| memory | 1000 ops/s | 4000 ops/s | - |",
		"| first call | 1 | 2.00 ms | 0.60 of the three-call protocol |",
		"test machine",
		"| SQLite | 1 | 400 / 410 µs | 1.20 / 1.26 | 1.05 | 0.20 / 0.19 | 0.95 | 0.30 / 0.33 | 1.10 |",
		"| SQLite | 2 | 400 / 400 µs | 1.20 / 1.20 | 1.00 | 0.20 / 0.20 | 1.00 | 0.30 / 0.30 | 1.00 |",
		"One run of `BenchmarkSuite/calls`",
		"A replay's extra 19 µs over the raw SELECT",
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
	if strings.Contains(page, "## One user's flood") {
		t.Errorf("a run without BenchmarkFlood has a section for it:\n%s", page)
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

// floodSample is BenchmarkFlood's output: SQLite's default rows as a run
// printed them, one row without limits and one with the per-user limits
// alone, and one PostgreSQL row.
const floodSample = `pkg: github.com/idemkit/sdk/examples/internal/exserve
cpu: Intel(R) Xeon(R) Processor
BenchmarkFlood/store=sqlite/batches-of-8/limits=default-2         	       3	   2427327 ns/op	        14.92 a-alone-ms	       824.0 a-calls/s	         1.242 read-p50-x	         1.242 read-p99-x	         0.3535 rest-read-p99-ms	         1.389 rest-write-p99-ms	         1.473 write-p50-x	         1.473 write-p99-x
BenchmarkFlood/store=sqlite/parallel-64/limits=default-2          	       3	   5722655 ns/op	         0.8414 a-alone-ms	       757.3 a-calls/s	         1.421 read-p50-x	         1.421 read-p99-x	         0.4100 rest-read-p99-ms	         0.5974 rest-write-p99-ms	         6.148 write-p50-x	         6.148 write-p99-x
BenchmarkFlood/store=sqlite/batches-0.99MB/limits=default-2       	       3	  32430317 ns/op	       141.9 a-alone-ms	        61.67 a-calls/s	        20.91 read-p50-x	        20.91 read-p99-x	         0.3177 rest-read-p99-ms	         0.7647 rest-write-p99-ms	        21.68 write-p50-x	        21.68 write-p99-x
BenchmarkFlood/store=sqlite/bodies-2MB/limits=default-2           	       3	   1137444 ns/op	      1010 a-alone-ms	         0 a-calls/s	         1.114 read-p50-x	         1.114 read-p99-x	         0.3734 rest-read-p99-ms	         0.6508 rest-write-p99-ms	         0.8637 write-p50-x	         0.8637 write-p99-x
BenchmarkFlood/store=sqlite/args-1MB/limits=default-2             	       3	  16595243 ns/op	       171.5 a-alone-ms	         0 a-calls/s	         6.718 read-p50-x	         6.718 read-p99-x	         0.6843 rest-read-p99-ms	         0.8819 rest-write-p99-ms	        17.69 write-p50-x	        17.69 write-p99-x
BenchmarkFlood/store=sqlite/batches-of-8/limits=off-2  20  9 ns/op  12 a-alone-ms  900 a-calls/s  300 read-p50-x  412.3 read-p99-x  0.35 rest-read-p99-ms  1.4 rest-write-p99-ms  8 write-p50-x  9.87 write-p99-x
BenchmarkFlood/store=sqlite/batches-of-8/limits=per-user-2  20  9 ns/op  12 a-alone-ms  900 a-calls/s  3 read-p50-x  77.7 read-p99-x  0.35 rest-read-p99-ms  1.4 rest-write-p99-ms  3 write-p50-x  66.6 write-p99-x
BenchmarkFlood/store=postgres/args-1MB/limits=default-2  200  9 ns/op  150.2 a-alone-ms  0 a-calls/s  2 read-p50-x  2.5 read-p99-x  0.5 rest-read-p99-ms  1.25 rest-write-p99-ms  2 write-p50-x  3.04 write-p99-x
`

// BenchmarkFlood's section has a row for each flood: b's p99 multiples
// with the default limits and without, on each store, a dash for a figure
// the run lacks, and nothing of the per-user rows; then one of a's
// requests alone for the 1 MB floods. It is there with the stores'
// results or without them.
func TestFlood(t *testing.T) {
	for name, in := range map[string]string{"with the stores": sample + floodSample, "alone": floodSample} {
		t.Run(name, func(t *testing.T) {
			_, page := report(t, in)
			_, section, ok := strings.Cut(page, "## One user's flood against another's calls\n")
			if !ok {
				t.Fatalf("the page has no section for BenchmarkFlood:\n%s", page)
			}
			section, _, _ = strings.Cut(section, "\n## ")
			for _, want := range []string{
				"| flood | SQLite | SQLite, no limits | PostgreSQL | PostgreSQL, no limits |\n|---|---|---|---|---|\n" +
					"| batches of 8 calls, 16 clients | 1.2 / 1.5 | 412 / 9.9 | - / - | - / - |\n" +
					"| one call a request, 64 clients | 1.4 / 6.1 | - / - | - / - | - / - |\n" +
					"| batches of 0.99 MB | 21 / 22 | - / - | - / - | - / - |\n" +
					"| bodies of 2 MB | 1.1 / 0.9 | - / - | - / - | - / - |\n" +
					"| 1 MB arguments | 6.7 / 18 | - / - | 2.5 / 3.0 | - / - |\n",
				"One of a's requests alone, with the default limits: " +
					"batches of 0.99 MB: SQLite 142 ms (b's p99 alone 0.32 ms / 0.76 ms), PostgreSQL - (b's p99 alone - / -); " +
					"1 MB arguments: SQLite 172 ms (b's p99 alone 0.68 ms / 0.88 ms), PostgreSQL 150 ms (b's p99 alone 0.50 ms / 1.25 ms).",
			} {
				if !strings.Contains(section, want) {
					t.Errorf("the section lacks %q:\n%s", want, section)
				}
			}
			for _, perUser := range []string{"78", "67"} {
				if strings.Contains(section, perUser) {
					t.Errorf("the section holds %s, a figure of the per-user limits:\n%s", perUser, section)
				}
			}
		})
	}
}

// A benchmark's name loses the GOMAXPROCS suffix go test adds, and only
// that: with GOMAXPROCS 1 there is none, and a name may end in a dash and
// a word.
func TestBenchName(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkSuite/calls-2":                                   "BenchmarkSuite/calls",
		"BenchmarkSuite/clients=8-16":                              "BenchmarkSuite/clients=8",
		"BenchmarkGuard":                                           "BenchmarkGuard",
		"BenchmarkFlood/store=sqlite/batches-of-8/limits=off":      "BenchmarkFlood/store=sqlite/batches-of-8/limits=off",
		"BenchmarkFlood/store=sqlite/batches-of-8/limits=per-user": "BenchmarkFlood/store=sqlite/batches-of-8/limits=per-user",
		"BenchmarkFlood/store=sqlite/args-1MB/limits=per-user-2":   "BenchmarkFlood/store=sqlite/args-1MB/limits=per-user",
	} {
		if got := benchName(in); got != want {
			t.Errorf("benchName(%q) = %q, want %q", in, got, want)
		}
	}
}
