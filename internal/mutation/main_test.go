package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every mutation's original text is in its file once, so the ordinary test
// run finds a stale entry too, without running the check.
func TestListIsCurrent(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := selectMutations(mutations, ""); err != nil {
		t.Fatal(err)
	}
	if len(mutations) < 15 {
		t.Errorf("%d mutations listed, want at least 15", len(mutations))
	}
	for _, m := range mutations {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		if n := bytes.Count(src, []byte(m.From)); n != 1 {
			t.Errorf("%s: the original text is found %d times in %s, want once", m.Name, n, m.File)
		}
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(m.Pkg))); err != nil || !fi.IsDir() {
			t.Errorf("%s: package %s is not a directory of the module", m.Name, m.Pkg)
		}
		if !slices.Contains([]string{"", postgres, dynamodb, firestore}, m.Needs) {
			t.Errorf("%s: Needs %q names no service the scripts start", m.Name, m.Needs)
		}
	}
}

func TestSelectMutations(t *testing.T) {
	ok := mutation{Name: "a/x", File: "f.go", From: "x", To: "y", Pkg: "./p", Run: "T"}
	other := ok
	other.Name = "b/y"
	sel, err := selectMutations([]mutation{ok, other}, "^b/")
	if err != nil || len(sel) != 1 || sel[0].Name != "b/y" {
		t.Errorf("select ^b/ = %v, %v; want b/y", sel, err)
	}
	noop := ok
	noop.To = noop.From
	for name, c := range map[string]struct {
		list    []mutation
		pattern string
	}{
		"twice":           {[]mutation{ok, ok}, ""},
		"no change":       {[]mutation{noop}, ""},
		"no match":        {[]mutation{ok}, "^zzz$"},
		"bad expression":  {[]mutation{ok}, "("},
		"no run pattern":  {[]mutation{{Name: "n", File: "f", From: "x", To: "y", Pkg: "./p"}}, ""},
		"no package":      {[]mutation{{Name: "n", File: "f", From: "x", To: "y", Run: "T"}}, ""},
		"no name or file": {[]mutation{{From: "x", To: "y", Pkg: "./p", Run: "T"}}, ""},
	} {
		if _, err := selectMutations(c.list, c.pattern); err == nil {
			t.Errorf("%s: selected, want an error", name)
		}
	}
}

func TestFailedLeaves(t *testing.T) {
	out := `=== RUN   TestConformance
--- FAIL: TestConformance (0.01s)
    --- FAIL: TestConformance/SideEffect (0.01s)
        --- FAIL: TestConformance/SideEffect/Fencing (0.01s)
            --- FAIL: TestConformance/SideEffect/Fencing/LateCompleteWhileNewOwnerPosts (0.00s)
            --- PASS: TestConformance/SideEffect/Fencing/LateComplete (0.00s)
            --- FAIL: TestConformance/SideEffect/Fencing/LateReleaseWhileNewOwnerPosts (0.00s)
    --- FAIL: TestConformance/Merge (0.00s)
FAIL
`
	got := failedLeaves([]byte(out))
	want := []string{
		"TestConformance/SideEffect/Fencing/LateCompleteWhileNewOwnerPosts",
		"TestConformance/SideEffect/Fencing/LateReleaseWhileNewOwnerPosts",
		"TestConformance/Merge",
	}
	if !slices.Equal(got, want) {
		t.Errorf("failedLeaves =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
