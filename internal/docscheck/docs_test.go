package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the module's root, two folders up.
const root = "../.."

// codes returns the values of the Code constants declared in idem
// (idem/errors.go) and in idem/target, the codes a caller may receive.
func codes(t *testing.T) []string {
	t.Helper()
	var files []*ast.File
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "idem", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := parsePkg(t, filepath.Join("idem", "target"))
	files = append(append(files, f), target...)
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if !isCode(vs.Type) {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok {
						c, _ := strconv.Unquote(lit.Value)
						out = append(out, c)
					}
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d codes in idem/errors.go and idem/target: %v", len(out), out)
	}
	slices.Sort(out)
	return out
}

// isCode reports whether typ is Code or idem.Code.
func isCode(typ ast.Expr) bool {
	switch x := typ.(type) {
	case *ast.Ident:
		return x.Name == "Code"
	case *ast.SelectorExpr:
		pkg, ok := x.X.(*ast.Ident)
		return ok && pkg.Name == "idem" && x.Sel.Name == "Code"
	}
	return false
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's list of refusal codes and docs/clients.md's table hold every
// code idem declares, and no other.
func TestCodesListedEverywhere(t *testing.T) {
	want := codes(t)
	tick := regexp.MustCompile("`([a-z_]+)`")

	readme := read(t, "README.md")
	i := strings.Index(readme, "`missing_key`")
	if i < 0 {
		t.Fatal("README.md lists no refusal codes")
	}
	end := strings.Index(readme[i:], "(what each means")
	if end < 0 {
		t.Fatal("README.md: the code list's end is not found")
	}
	var got []string
	for _, m := range tick.FindAllStringSubmatch(readme[i:i+end], -1) {
		got = append(got, m[1])
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("README.md lists codes %v, idem declares %v", got, want)
	}

	var table []string
	clients := read(t, "docs/clients.md")
	start := strings.Index(clients, "\n## Errors")
	if start < 0 {
		t.Fatal(`docs/clients.md has no "## Errors" section`)
	}
	section, _, _ := strings.Cut(clients[start+1:], "\n## ")
	for _, line := range strings.Split(section, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_]+)` \\|").FindStringSubmatch(line); m != nil {
			table = append(table, m[1])
		}
	}
	slices.Sort(table)
	if !slices.Equal(table, want) {
		t.Errorf("docs/clients.md's table has codes %v, idem declares %v", table, want)
	}
}

// What a repeat runs: no page and no doc comment may say a repeat with an op
// id runs nothing. It may run the handler in a transaction that rolls back
// when it reaches a process that has not answered the op lately
// (docs/protect.md, "New tools that write through the store").
func TestNoPageSaysARepeatRunsNothing(t *testing.T) {
	wrong := regexp.MustCompile(`(?i)(without running anything|repeat[^.]*runs nothing|replay[^.]*runs nothing|nothing runs again)`)
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "idem/*.go", "examples/*/*.go"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			if !strings.HasSuffix(rel, "_test.go") {
				files = append(files, rel)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("read only %d files", len(files))
	}
	for _, f := range files {
		for n, line := range strings.Split(read(t, f), "\n") {
			if wrong.MatchString(line) {
				t.Errorf("%s:%d says a repeat runs nothing: %s", f, n+1, strings.TrimSpace(line))
			}
		}
	}
	// And the pages that explain it say what does happen.
	for _, f := range []string{"README.md", "docs/protect.md"} {
		if !strings.Contains(read(t, f), "rolls back") {
			t.Errorf("%s does not say that a repeat elsewhere may run in a transaction that rolls back", f)
		}
	}
}
