package docscheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemtest"
)

// surveyHeader opens the table of what a caller sees in each server's
// section of docs/survey.md.
const surveyHeader = "| tool | hints | op id | record keys |"

// Survey checks the table of what a caller sees in the section of
// docs/survey.md whose heading holds section against what srv lists, over
// an in-memory connection: a row for each tool and no other, its hints
// (those set true of read-only, idempotent and destructive, or "none"),
// whether its op id is required, optional or absent ("-"), and its record
// keys in the order they are required.
func Survey(t *testing.T, srv *mcp.Server, section string) {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "survey.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := surveyTable(string(page), section)
	if err != nil {
		t.Fatalf("docs/survey.md: %v", err)
	}
	ctx := context.Background()
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	got := map[string]string{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[tool.Name] = describe(t, tool)
	}
	for name, g := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("docs/survey.md, %s: no row for %s, which the server lists as %s", section, name, g)
		} else if w != g {
			t.Errorf("docs/survey.md, %s: %s\n  says  %s\n  lists %s", section, name, w, g)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("docs/survey.md, %s: a row for %s, which the server does not list", section, name)
		}
	}
}

// describe writes a listed tool as a row of the table writes it: hints |
// op id | record keys.
func describe(t *testing.T, tool *mcp.Tool) string {
	t.Helper()
	var hints []string
	if a := tool.Annotations; a != nil {
		if a.ReadOnlyHint {
			hints = append(hints, "read-only")
		}
		if a.IdempotentHint {
			hints = append(hints, "idempotent")
		}
		if a.DestructiveHint != nil && *a.DestructiveHint {
			hints = append(hints, "destructive")
		}
	}
	if len(hints) == 0 {
		hints = []string{"none"}
	}
	b, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("%s: input schema: %v", tool.Name, err)
	}
	opID := "-"
	if _, ok := schema.Properties["op_id"]; ok {
		opID = "optional"
		if slices.Contains(schema.Required, "op_id") {
			opID = "required"
		}
	}
	keys := []string{}
	for _, r := range schema.Required {
		if strings.Contains(schema.Properties[r].Description, "Record key") {
			keys = append(keys, "`"+r+"`")
		}
	}
	if len(keys) == 0 {
		keys = []string{"-"}
	}
	return strings.Join(hints, ", ") + " | " + opID + " | " + strings.Join(keys, ", ")
}

var surveyRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| (.*) \\|$")

// surveyTable returns the rows, by tool, of the table in the section of
// page whose heading holds section.
func surveyTable(page, section string) (map[string]string, error) {
	var in, table bool
	rows := map[string]string{}
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.Contains(l, section)
			continue
		}
		switch {
		case !in:
		case l == surveyHeader:
			table = true
		case table && strings.HasPrefix(l, "|---"):
		case table && strings.HasPrefix(l, "|"):
			m := surveyRow.FindStringSubmatch(l)
			if m == nil {
				return nil, fmt.Errorf("%q is not a row of %s", l, surveyHeader)
			}
			rows[m[1]] = m[2]
		default:
			table = false
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("the section on %s has no table %s", section, surveyHeader)
	}
	return rows, nil
}

// repoRoot returns the repository's root, the folder of go.work, from the
// test's folder up: the examples are a module of their own below it.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.work above the test's folder")
		}
		dir = up
	}
}
