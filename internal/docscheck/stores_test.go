package docscheck

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// storeNames are the names pages give each store package.
var storeNames = map[string]string{
	"memory":    "memory store",
	"sqlite":    "SQLite",
	"postgres":  "PostgreSQL",
	"dynamo":    "DynamoDB",
	"firestore": "Firestore",
}

// stores returns the store packages: the folders under store/ with Go
// files, less the conformance suite.
func stores(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range goDirs(t) {
		name, ok := strings.CutPrefix(dir, "store/")
		if !ok || name == "storetest" || strings.Contains(name, "/") {
			continue
		}
		if files, _ := parsePkg(t, dir); len(files) == 0 {
			continue
		}
		if storeNames[name] == "" {
			t.Fatalf("store/%s: add what pages call it to storeNames", name)
		}
		out = append(out, name)
	}
	if len(out) < 5 {
		t.Fatalf("found stores %v", out)
	}
	return out
}

// paragraphs returns the paragraphs of the pages and of the comments in
// the module's Go files, by where they start.
func paragraphs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(where string, text string, first int) {
		n := first
		for _, p := range strings.Split(text, "\n\n") {
			out[where+":"+strconv.Itoa(n)] = p
			n += strings.Count(p, "\n") + 2
		}
	}
	for _, p := range pages(t) {
		add(p, strings.Join(prose(read(t, p)), "\n"), 1)
	}
	for _, dir := range goDirs(t) {
		files, fset := parsePkg(t, dir)
		for _, f := range files {
			for _, cg := range f.Comments {
				pos := fset.Position(cg.Pos())
				add(dir+"/"+filepath.Base(pos.Filename), cg.Text(), pos.Line)
			}
		}
	}
	return out
}

// A paragraph that names three or more store packages names them all: a
// list of the stores that lacks one is out of date (idem.Store's doc named
// three of five).
func TestListsNameEveryStore(t *testing.T) {
	all := stores(t)
	pkg := regexp.MustCompile(`\bstore/([a-z]+)\b`)
	lists := 0
	for where, p := range paragraphs(t) {
		var named []string
		for _, m := range pkg.FindAllStringSubmatch(p, -1) {
			if slices.Contains(all, m[1]) && !slices.Contains(named, m[1]) {
				named = append(named, m[1])
			}
		}
		if len(named) < 3 {
			continue
		}
		lists++
		for _, s := range all {
			if !slices.Contains(named, s) {
				t.Errorf("%s: a list of the stores without store/%s", where, s)
			}
		}
	}
	if lists < 2 {
		t.Fatalf("found %d lists of the stores", lists)
	}
}

// No sentence calls a store that exists planned or to come.
func TestNoStoreIsPlanned(t *testing.T) {
	future := regexp.MustCompile(`(?i)\b(planned|will join|not yet (written|implemented|available)|coming|to come)\b`)
	all := stores(t)
	for where, p := range paragraphs(t) {
		for _, sentence := range strings.Split(strings.ReplaceAll(p, "\n", " "), ". ") {
			if !future.MatchString(sentence) {
				continue
			}
			for _, s := range all {
				if strings.Contains(sentence, storeNames[s]) {
					t.Errorf("%s: calls %s, which store/%s implements, %q: %s", where, storeNames[s], s, future.FindString(sentence), sentence)
				}
			}
		}
	}
}
