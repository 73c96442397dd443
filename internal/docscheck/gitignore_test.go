package docscheck

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mainPackages returns the folders, relative to the root, of the module's
// main packages.
func mainPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, dir := range goDirs(t) {
		if files, _ := parsePkg(t, dir); len(files) > 0 && files[0].Name.Name == "main" {
			dirs = append(dirs, dir)
		}
	}
	if !slices.Contains(dirs, "cmd/idem") || len(dirs) < 5 {
		t.Fatalf("found main packages %v, want cmd/idem and the examples among them", dirs)
	}
	return dirs
}

// What go build writes for a main package, in its folder or in the root,
// is in .gitignore, so that no binary is committed again (cmd/idem/idem
// was, 12 MB).
func TestBuildOutputsIgnored(t *testing.T) {
	ignored := map[string]bool{}
	for _, line := range strings.Split(read(t, ".gitignore"), "\n") {
		ignored[strings.TrimSpace(line)] = true
	}
	for _, dir := range mainPackages(t) {
		name := path.Base(dir)
		want := []string{"/" + dir + "/" + name}
		// go build ./dir in the root writes ./name, unless a folder has
		// that name.
		if fi, err := os.Stat(filepath.Join(root, name)); err != nil || !fi.IsDir() {
			want = append(want, "/"+name)
		}
		for _, w := range want {
			if !ignored[w] {
				t.Errorf(".gitignore lacks %s, the binary go build writes for %s", w, dir)
			}
		}
	}
}
