package docscheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pages returns the Markdown pages the checks read, relative to the root.
func pages(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", "interop/README.md"}
	for _, f := range m {
		out = append(out, "docs/"+filepath.Base(f))
	}
	if len(out) < 8 {
		t.Fatalf("read only %d pages", len(out))
	}
	return out
}

// prose returns page's lines, those of fenced code blocks made empty: what
// a page says, not what it shows to run.
func prose(page string) []string {
	lines := strings.Split(page, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return lines
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	mdLink   = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	scheme   = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// slugs returns the anchors GitHub gives the headings of page.
func slugs(page string) map[string]bool {
	out := map[string]bool{}
	for _, l := range prose(page) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		s := b.String()
		for n := 1; out[s]; n++ { // a repeated heading gets -1, -2, ...
			s = fmt.Sprintf("%s-%d", b.String(), n)
		}
		out[s] = true
	}
	return out
}

// Every relative link of a page leads to a file of the repository, and its
// #anchor to a heading of the page it names.
func TestLinksResolve(t *testing.T) {
	links := 0
	for _, p := range pages(t) {
		for n, l := range prose(read(t, p)) {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				if file == "" {
					file = p
				} else {
					file = path.Join(path.Dir(p), file)
				}
				if _, err := os.Stat(filepath.Join(root, file)); err != nil {
					t.Errorf("%s:%d links to %s: no such file", p, n+1, target)
					continue
				}
				if strings.HasSuffix(file, ".go") && goLine.MatchString(anchor) {
					continue // checked by TestGoLineLinks
				}
				if anchor != "" && (!strings.HasSuffix(file, ".md") || !slugs(read(t, file))[anchor]) {
					t.Errorf("%s:%d links to %s: %s has no heading #%s", p, n+1, target, file, anchor)
				}
			}
		}
	}
	if links < 30 {
		t.Fatalf("found only %d relative links", links)
	}
}

// mutationNames returns the names of internal/mutation's mutations, which
// pages write like paths (idem/flights).
func mutationNames(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*Name:\s*"([^"]+)"`).FindAllStringSubmatch(read(t, "internal/mutation/mutations.go"), -1) {
		out = append(out, m[1])
	}
	if len(out) < 10 {
		t.Fatalf("found %d mutation names", len(out))
	}
	return out
}

// Every path a page or a Go comment names (store/memory, idem/tool.go,
// ./examples/focus, store/storetest.Run) starts a folder or file of the
// repository, and every bare file name (stale_test.go, DESIGN.md) is one
// somewhere in it. A page's code blocks are left out: they may show a
// reader's own paths.
func TestPathsResolve(t *testing.T) {
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var tops []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops = append(tops, regexp.QuoteMeta(e.Name()))
		}
	}
	pathRef := regexp.MustCompile(`(?:^|[\s(\["'` + "`" + `])(?:\./)?((?:` + strings.Join(tops, "|") + `)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*])`)
	fileRef := regexp.MustCompile(`(?:^|[\s(\["'` + "`" + `])([A-Za-z0-9_.-]+\.(?:go|md|sh))\b`)
	files := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		files[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mutations := mutationNames(t)
	exists := func(p string) bool {
		m, err := filepath.Glob(filepath.Join(root, p))
		return err == nil && len(m) > 0
	}
	refs := 0
	for where, text := range paragraphs(t) {
		for _, m := range pathRef.FindAllStringSubmatch(text, -1) {
			refs++
			ref := strings.TrimSuffix(m[1], ".")
			// A package's name: store/storetest.Run is store/storetest.
			dir, last := path.Split(ref)
			pkg, _, _ := strings.Cut(last, ".")
			if !exists(ref) && !exists(dir+pkg) && !slices.Contains(mutations, ref) {
				t.Errorf("%s names %s: no such file or folder", where, ref)
			}
		}
		for _, m := range fileRef.FindAllStringSubmatch(text, -1) {
			refs++
			if !files[m[1]] {
				t.Errorf("%s names %s: no file of that name in the repository", where, m[1])
			}
		}
	}
	if refs < 100 {
		t.Fatalf("found only %d paths", refs)
	}
}

var (
	goLine     = regexp.MustCompile(`^L[0-9]+$`)
	goFuncLink = regexp.MustCompile("\\[`([A-Za-z_][A-Za-z0-9_]*)`\\]\\(([^)#]+\\.go)#L([0-9]+)\\)")
)

// A link to a line of a Go file, [`name`](file.go#L12), leads to the line
// that declares the function or method name: when the code moves, the link
// must move with it.
func TestGoLineLinks(t *testing.T) {
	links := 0
	for _, p := range pages(t) {
		for n, l := range prose(read(t, p)) {
			for _, m := range goFuncLink.FindAllStringSubmatch(l, -1) {
				links++
				name, file, line := m[1], path.Join(path.Dir(p), m[2]), m[3]
				lines := strings.Split(read(t, file), "\n")
				i, _ := strconv.Atoi(line)
				decl := regexp.MustCompile(`^func (\([^)]*\) )?` + name + `[\[(]`)
				if i < 1 || i > len(lines) || !decl.MatchString(lines[i-1]) {
					t.Errorf("%s:%d links %s to %s line %s, which does not declare it", p, n+1, name, file, line)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("found no links to lines of Go files")
	}
}
