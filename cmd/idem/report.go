package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// A report is the whole audit, as -json prints it.
type report struct {
	Server struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server"`
	Transport string        `json:"transport"`
	Tools     []toolReport  `json:"tools"`
	Classes   map[class]int `json:"classes"`
	Problems  int           `json:"problems"`
	Warnings  int           `json:"warnings"`
	Infos     int           `json:"infos"`
	Strict    bool          `json:"strict"`
	// ExitStatus is the status idem audit exits with.
	ExitStatus int `json:"exit_status"`
}

func newReport(l *listing, transport string, strict bool) *report {
	r := &report{Transport: transport, Strict: strict, Tools: []toolReport{}, Classes: map[class]int{}}
	r.Server.Name, r.Server.Version = l.Server.Name, l.Server.Version
	for _, c := range []class{classReadOnly, classIdempotent, classNonIdempotent, classUnknown, classConflicting} {
		r.Classes[c] = 0
	}
	for _, t := range l.Tools {
		tr := classify(t)
		r.Classes[tr.Class]++
		for _, f := range tr.Findings {
			switch f.Severity {
			case problem:
				r.Problems++
			case warning:
				r.Warnings++
			default:
				r.Infos++
			}
		}
		r.Tools = append(r.Tools, tr)
	}
	if r.Problems > 0 || (strict && r.Warnings > 0) {
		r.ExitStatus = exitFindings
	}
	return r
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText prints the table for people, then the findings, one a line,
// and the verdict.
func (r *report) writeText(w io.Writer) error {
	var b strings.Builder
	name := r.Server.Name
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(&b, "server %s %s over %s: %d tools\n\n", name, r.Server.Version, r.Transport, len(r.Tools))
	if len(r.Tools) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tCLASS\tHINTS\tOP ID\tKEYS\tFINDINGS")
		for _, t := range r.Tools {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Class.words(), hintWords(t.Annotations),
				orDash(t.OpID), orDash(strings.Join(t.Keys, ",")), findingCounts(t.Findings))
		}
		tw.Flush()
		b.WriteString("\n")
	}
	for _, sev := range []string{problem, warning, info} {
		for _, t := range r.Tools {
			for _, f := range t.Findings {
				if f.Severity == sev {
					fmt.Fprintf(&b, "%s: %s %s [%s]\n", sev, t.Name, f.Message, f.Code)
				}
			}
		}
	}
	switch {
	case r.ExitStatus == exitPass && r.Warnings == 0 && r.Infos == 0:
		b.WriteString("pass: every tool is read-only or an idempotent write, and every schema is accepted\n")
	case r.ExitStatus == exitPass && r.Warnings == 0:
		fmt.Fprintf(&b, "pass: no problem; %d finding%s for information\n", r.Infos, plural(r.Infos))
	case r.ExitStatus == exitPass:
		fmt.Fprintf(&b, "pass, with %d warning%s (-strict makes them fail)\n", r.Warnings, plural(r.Warnings))
	default:
		fmt.Fprintf(&b, "fail: %d problems, %d warnings (exit status %d)\n", r.Problems, r.Warnings, r.ExitStatus)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// hintWords lists the hints a tool sets to true; "none" when it gives none
// of the three, "all false" when it gives them as false.
func hintWords(hints map[string]bool) string {
	if len(hints) == 0 {
		return "none"
	}
	var words []string
	for _, h := range []struct{ key, word string }{{hintReadOnly, "read-only"}, {hintDestructive, "destructive"}, {hintIdempotent, "idempotent"}} {
		if hints[h.key] {
			words = append(words, h.word)
		}
	}
	if len(words) == 0 {
		return "all false"
	}
	return strings.Join(words, ",")
}

func findingCounts(fs []finding) string {
	n := map[string]int{}
	for _, f := range fs {
		n[f.Severity]++
	}
	var parts []string
	for _, sev := range []string{problem, warning} {
		if n[sev] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s%s", n[sev], sev, plural(n[sev])))
		}
	}
	if n[info] > 0 {
		parts = append(parts, fmt.Sprintf("%d info", n[info]))
	}
	return orDash(strings.Join(parts, ", "))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
