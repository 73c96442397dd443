package docscheck

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const module = "github.com/idemkit/sdk"

// pkgSyms are the names a package declares, for doc links: its top-level
// names, and for each type the names [T.Name] may follow (methods, fields,
// interface methods), or the package and type an alias stands for.
type pkgSyms struct {
	top     map[string]bool
	members map[string]map[string]bool
	open    map[string]bool // types with embedded members: any name goes
	alias   map[string][2]string
}

// parsePkg parses the non-test files of the folder dir (relative to the
// root).
func parsePkg(t *testing.T, dir string) ([]*ast.File, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	m, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	var files []*ast.File
	for _, f := range m {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, af)
	}
	return files, fset
}

func symsOf(t *testing.T, dir string) *pkgSyms {
	files, _ := parsePkg(t, dir)
	s := &pkgSyms{top: map[string]bool{}, members: map[string]map[string]bool{}, open: map[string]bool{}, alias: map[string][2]string{}}
	member := func(typ, name string) {
		if s.members[typ] == nil {
			s.members[typ] = map[string]bool{}
		}
		s.members[typ][name] = true
	}
	fields := func(typ string, fl *ast.FieldList) {
		for _, f := range fl.List {
			if len(f.Names) == 0 {
				s.open[typ] = true
			}
			for _, n := range f.Names {
				member(typ, n.Name)
			}
		}
	}
	imports := importsOf(files...)
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					s.top[d.Name.Name] = true
					continue
				}
				r := d.Recv.List[0].Type
				if st, ok := r.(*ast.StarExpr); ok {
					r = st.X
				}
				switch x := r.(type) {
				case *ast.IndexExpr:
					r = x.X
				case *ast.IndexListExpr:
					r = x.X
				}
				member(r.(*ast.Ident).Name, d.Name.Name)
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						name := sp.Name.Name
						s.top[name] = true
						if sel, ok := sp.Type.(*ast.SelectorExpr); ok && sp.Assign.IsValid() {
							s.alias[name] = [2]string{imports[sel.X.(*ast.Ident).Name], sel.Sel.Name}
						}
						switch tt := sp.Type.(type) {
						case *ast.StructType:
							fields(name, tt.Fields)
						case *ast.InterfaceType:
							fields(name, tt.Methods)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							s.top[n.Name] = true
						}
					}
				}
			}
		}
	}
	return s
}

// importsOf maps the names files import under to their paths. A package's
// name is its path's last element (the module's packages are named so),
// less a major version.
func importsOf(files ...*ast.File) map[string]string {
	out := map[string]string{}
	for _, im := range slices.Concat(importSpecs(files)...) {
		p, _ := strconv.Unquote(im.Path.Value)
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		} else if len(name) > 1 && name[0] == 'v' && unicode.IsDigit(rune(name[1])) {
			name = path.Base(path.Dir(p)) // github.com/jackc/pgx/v5
		}
		out[name] = p
	}
	return out
}

func importSpecs(files []*ast.File) [][]*ast.ImportSpec {
	out := make([][]*ast.ImportSpec, len(files))
	for i, f := range files {
		out[i] = f.Imports
	}
	return out
}

// Every doc link in the module's Go files ([Name], [T.Method],
// [pkg.Name]) names something its package declares, so that godoc shows a
// link and not the bracketed text. Links into other modules are not
// checked.
func TestDocLinksResolve(t *testing.T) {
	syms := map[string]*pkgSyms{}
	lookup := func(dir string) *pkgSyms {
		if syms[dir] == nil {
			syms[dir] = symsOf(t, dir)
		}
		return syms[dir]
	}
	var resolves func(dir, recv, name string) bool
	resolves = func(dir, recv, name string) bool {
		s := lookup(dir)
		if recv == "" && name == "" { // [path/to/pkg]
			return len(s.top) > 0
		}
		if recv == "" {
			return s.top[name]
		}
		if a, ok := s.alias[recv]; ok {
			rel, in := strings.CutPrefix(a[0], module+"/")
			return !in || resolves(rel, a[1], name)
		}
		return s.top[recv] && (s.members[recv][name] || s.open[recv])
	}
	links := 0
	for _, dir := range goDirs(t) {
		files, fset := parsePkg(t, dir)
		// As in go doc, a link may name a package that any file of the
		// package imports.
		imports := importsOf(files...)
		cp := comment.Parser{
			LookupPackage: func(name string) (string, bool) {
				ip, ok := imports[name]
				return ip, ok
			},
			// What reads as a link is one: an exported name, or two
			// names.
			LookupSym: func(recv, name string) bool {
				return recv != "" || name != "" && unicode.IsUpper(rune(name[0]))
			},
		}
		for _, f := range files {
			for _, cg := range f.Comments {
				for _, l := range docLinks(cp.Parse(cg.Text())) {
					links++
					target := dir
					if l.ImportPath != "" {
						r, ok := strings.CutPrefix(l.ImportPath, module+"/")
						if !ok {
							continue
						}
						target = r
					}
					if !resolves(target, l.Recv, l.Name) {
						name := l.Name
						if l.Recv != "" {
							name = l.Recv + "." + name
						}
						pos := fset.Position(cg.Pos())
						t.Errorf("%s/%s: the comment at line %d links [%s], which names nothing in %s", dir, filepath.Base(pos.Filename), pos.Line, name, target)
					}
				}
			}
		}
	}
	if links < 100 {
		t.Fatalf("found only %d doc links", links)
	}
}

// goDirs returns the folders, relative to the root, that hold Go files.
func goDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "testdata" || (strings.HasPrefix(n, ".") && p != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// docLinks returns the doc links of d.
func docLinks(d *comment.Doc) []*comment.DocLink {
	var out []*comment.DocLink
	var walk func([]comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				out = append(out, t)
			case *comment.Link:
				walk(t.Text)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				walk(b.Text)
			case *comment.Heading:
				walk(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					blocks(it.Content)
				}
			}
		}
	}
	blocks(d.Content)
	return out
}
