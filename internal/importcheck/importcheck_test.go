package importcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testHelpers are the public packages meant to be imported only from tests,
// relative to the module root.
var testHelpers = []string{
	"idemtest",
	"idem/mcpgo/mcpgotest",
	"merge/mergetest",
	"store/storetest",
}

// skipDirs are directories whose packages are not library code: a package
// under any of them (at any depth) is not checked.
var skipDirs = []string{"cmd", "examples", "internal", "interop", "testdata"}

// mustHave are packages the discovery must find, so that a mistake in it
// cannot make the test pass on an empty list.
var mustHave = []string{"idem", "merge", "sideeffect", "store/memory", "store/sqlite", "store/postgres", "store/dynamo", "store/firestore"}

// forbidden are packages no library package may depend on: importing them
// drags test flags (-test.*, -rapid.*) into every server.
var forbidden = []string{"testing", "pgregory.net/rapid"}

var testFlag = regexp.MustCompile(`(?m)^\s*-(test|rapid)\.\S*`)

const sentinel = "importcheck.sentinel"

func TestLibraryPackagesCarryNoTestFlags(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, modPath := module(t, goCmd)
	pkgs := libraryPackages(t, goCmd, root, modPath)
	t.Logf("library packages: %s", strings.Join(pkgs, " "))

	t.Run("deps", func(t *testing.T) {
		out := run(t, root, goCmd, append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
		deps := strings.Fields(out)
		for _, f := range forbidden {
			if slices.Contains(deps, f) {
				t.Errorf("library packages depend on %s: %s", f, culprits(t, goCmd, root, pkgs, f))
			}
		}
	})

	t.Run("flags", func(t *testing.T) {
		dir := t.TempDir()
		var src strings.Builder
		src.WriteString("// Command importcheck imports every library package and parses its flags.\npackage main\n\nimport (\n\t\"flag\"\n\n")
		for _, p := range pkgs {
			fmt.Fprintf(&src, "\t_ %q\n", p)
		}
		fmt.Fprintf(&src, ")\n\nfunc main() {\n\tflag.Bool(%q, false, \"shows that usage was printed\")\n\tflag.Parse()\n}\n", sentinel)
		mainGo := filepath.Join(dir, "main.go")
		if err := os.WriteFile(mainGo, []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		// The program is built as if it were a package of the root module
		// (so the workspace, go.work, resolves its imports), through an overlay:
		// nothing is written into the source tree.
		pkgDir := filepath.Join(root, "internal", "importcheck", "generated")
		overlay, err := json.Marshal(map[string]any{
			"Replace": map[string]string{filepath.Join(pkgDir, "main.go"): mainGo},
		})
		if err != nil {
			t.Fatal(err)
		}
		overlayFile := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "importcheck")
		run(t, root, goCmd, "build", "-overlay", overlayFile, "-o", bin, pkgDir)

		cmd := exec.Command(bin, "-h")
		var usage bytes.Buffer
		cmd.Stdout, cmd.Stderr = &usage, &usage
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s -h: %v\n%s", bin, err, usage.String())
		}
		if !strings.Contains(usage.String(), "-"+sentinel) {
			t.Fatalf("%s -h did not print the flag usage:\n%s", bin, usage.String())
		}
		if found := testFlag.FindAllString(usage.String(), -1); found != nil {
			for i := range found {
				found[i] = strings.TrimSpace(found[i])
			}
			t.Errorf("a program importing the library packages has test flags %s; usage:\n%s",
				strings.Join(found, " "), usage.String())
		}
	})
}

// module returns the root module's directory and path.
func module(t *testing.T, goCmd string) (root, path string) {
	t.Helper()
	gomod := strings.TrimSpace(run(t, ".", goCmd, "env", "GOMOD"))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside a module")
	}
	root = filepath.Dir(gomod)
	out := run(t, root, goCmd, "list", "-m", "-f", "{{.Dir}} {{.Path}}")
	for line := range strings.Lines(out) {
		if dir, p, _ := strings.Cut(strings.TrimSpace(line), " "); dir == root {
			return root, p
		}
	}
	t.Fatalf("go list -m does not list %s:\n%s", root, out)
	return "", ""
}

// libraryPackages lists the importable packages of every module under the
// root module's path (the nested modules too) that are neither test
// helpers nor under a skipped directory.
func libraryPackages(t *testing.T, goCmd, root, modPath string) []string {
	t.Helper()
	out := run(t, root, goCmd, "list", "-f", "{{.ImportPath}} {{.Name}}", modPath+"/...")
	var pkgs, rels []string
	for line := range strings.Lines(out) {
		importPath, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || name == "main" {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(importPath, modPath), "/")
		if slices.Contains(testHelpers, rel) || slices.ContainsFunc(strings.Split(rel, "/"), func(seg string) bool {
			return slices.Contains(skipDirs, seg)
		}) {
			continue
		}
		pkgs, rels = append(pkgs, importPath), append(rels, rel)
	}
	for _, want := range mustHave {
		if !slices.Contains(rels, want) {
			t.Fatalf("package %s not found among %v", want, rels)
		}
	}
	return pkgs
}

// culprits names the packages among pkgs that depend on dep.
func culprits(t *testing.T, goCmd, root string, pkgs []string, dep string) string {
	t.Helper()
	out := run(t, root, goCmd, append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, pkgs...)...)
	var names []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 0 && slices.Contains(f[1:], dep) {
			names = append(names, f[0])
		}
	}
	return strings.Join(names, ", ")
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
