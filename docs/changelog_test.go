package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChangelogListsEveryDeprecation checks that every exported name the
// module's code marks Deprecated (a "Deprecated:" paragraph in its doc) is
// listed, as `package.Name`, in CHANGELOG.md's Deprecated sections: a user
// learns of it there before the compiler names only the old symbol.
func TestChangelogListsEveryDeprecation(t *testing.T) {
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	var deprecated strings.Builder // the Deprecated sections' text
	in := false
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			in = l == "### Deprecated"
			continue
		}
		if in {
			deprecated.WriteString(l + "\n")
		}
	}
	var names []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "internal" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		names = append(names, deprecatedNames(f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no Deprecated name found: App.Key is one")
	}
	for _, n := range names {
		if !strings.Contains(deprecated.String(), "`"+n+"`") {
			t.Errorf("%s is marked Deprecated and not listed in CHANGELOG.md's Deprecated sections", n)
		}
	}
}

// deprecatedNames are the exported names of f whose doc has a Deprecated
// paragraph: package.Name, package.Type.Field, package.Type.Method.
func deprecatedNames(f *ast.File) []string {
	pkg := f.Name.Name
	is := func(g *ast.CommentGroup) bool {
		return g != nil && strings.Contains("\n"+g.Text(), "\nDeprecated: ")
	}
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || !is(d.Doc) {
				continue
			}
			name := pkg + "." + d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if id, ok := t.(*ast.Ident); ok {
					name = pkg + "." + id.Name + "." + d.Name.Name
				}
			}
			out = append(out, name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && (is(s.Doc) || len(d.Specs) == 1 && is(d.Doc)) {
						out = append(out, pkg+"."+s.Name.Name)
					}
					if st, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								if n.IsExported() && is(fl.Doc) {
									out = append(out, pkg+"."+s.Name.Name+"."+n.Name)
								}
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && (is(s.Doc) || len(d.Specs) == 1 && is(d.Doc)) {
							out = append(out, pkg+"."+n.Name)
						}
					}
				}
			}
		}
	}
	return out
}
