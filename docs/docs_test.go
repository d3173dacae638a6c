package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated parts of ARCHITECTURE.md")

const module = "github.com/blackbox-audit/blackbox"

// pkg is one package of the module as `go list` sees it.
type pkg struct {
	ImportPath string
	Imports    []string
	Dir        string
	Name       string
}

// listPackages runs `go list -json ./...` at the module's root and returns
// its packages, keyed by their path relative to the module.
func listPackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if rel == p.ImportPath || rel == "docs" {
			continue
		}
		var ours []string
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				ours = append(ours, r)
			}
		}
		sort.Strings(ours)
		imports[rel] = ours
	}
	return imports
}

// importTable renders who imports whom: packages by layer (a package comes
// after everything it imports), then by name, each with the module's
// packages it imports, wrapped at 118 columns.
func importTable(imports map[string][]string) string {
	layer := map[string]int{}
	var depth func(p string) int
	depth = func(p string) int {
		if d, ok := layer[p]; ok {
			return d
		}
		d := 0
		for _, imp := range imports[p] {
			d = max(d, depth(imp)+1)
		}
		layer[p] = d
		return d
	}
	names := make([]string, 0, len(imports))
	for p := range imports {
		depth(p)
		names = append(names, p)
	}
	slices.SortFunc(names, func(a, b string) int {
		if layer[a] != layer[b] {
			return layer[a] - layer[b]
		}
		return strings.Compare(a, b)
	})
	col := 22 // the import lists' column: past the longest name
	for _, p := range names {
		col = max(col, len(p)+2)
	}
	var b strings.Builder
	last := 0
	for _, p := range names {
		if layer[p] != last {
			b.WriteString("\n")
			last = layer[p]
		}
		line := fmt.Sprintf("%-*s", col, p)
		if len(imports[p]) == 0 {
			b.WriteString(line + "nothing of ours\n")
			continue
		}
		for i, imp := range imports[p] {
			word := imp
			if i < len(imports[p])-1 {
				word += ","
			}
			if len(line)+1+len(word) > 118 && len(strings.TrimSpace(line)) > 0 && i > 0 {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = strings.Repeat(" ", col)
			} else if i > 0 {
				line += " "
			}
			line += word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

const (
	beginImports = "<!-- go list: imports -->\n```\n"
	endImports   = "```\n<!-- end -->"
)

// TestArchitectureImportTable checks that ARCHITECTURE.md's import table is
// the one `go list` gives today (go test ./docs -update rewrites it).
func TestArchitectureImportTable(t *testing.T) {
	const file = "ARCHITECTURE.md"
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, beginImports)
	j := strings.Index(text, endImports)
	if i < 0 || j < i {
		t.Fatalf("%s: no generated import table (between %q and %q)", file, beginImports, endImports)
	}
	got := text[i+len(beginImports) : j]
	want := importTable(listPackages(t))
	if got == want {
		return
	}
	if *update {
		text = text[:i+len(beginImports)] + want + text[j:]
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the import table is not go list's (go test ./docs -update rewrites it)\ngot:\n%s\nwant:\n%s", file, got, want)
}

// TestArchitectureTreeNamesEveryPackage checks that the package tree at the
// top of ARCHITECTURE.md names every package of the module, and nothing that
// is not one (a directory of examples/ or bench/ counts by its top folder).
func TestArchitectureTreeNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.SplitN(string(doc), "```\n", 3)
	if len(blocks) < 3 {
		t.Fatal("ARCHITECTURE.md: no package tree in its first code block")
	}
	tree := blocks[1]
	named := map[string]bool{}
	for _, line := range strings.Split(tree, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasSuffix(f[0], "/") && !strings.HasPrefix(line, " ") {
			named[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	for p := range listPackages(t) {
		if top, _, _ := strings.Cut(p, "/"); top == "bench" && named[top] {
			continue
		}
		if !named[p] {
			t.Errorf("ARCHITECTURE.md's tree does not name package %s", p)
		}
		delete(named, p)
	}
	delete(named, "bench")
	delete(named, "examples")
	delete(named, "docs")
	for p := range named {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("ARCHITECTURE.md's tree names %s/, which does not exist", p)
		}
	}
}

var citedFile = regexp.MustCompile("`((?:[a-zA-Z_]+/)+[a-zA-Z_]+\\.go)`")

// TestCitedFilesExist checks that every source file a document cites by its
// path exists (paths are from the module's root, or from examples/orders/ in
// the documents about the example).
func TestCitedFilesExist(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../README.md")
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range citedFile.FindAllStringSubmatch(string(b), -1) {
			path := m[1]
			if !exists(filepath.Join("..", path)) && !exists(filepath.Join("..", "examples", "orders", path)) {
				t.Errorf("%s cites %s, which does not exist", d, path)
			}
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

var quoted = regexp.MustCompile("(?s)<!-- quoted from ([^ ]+) -->\n```go\n(.*?)\n```")

// TestQuotedCodeIsTheCode checks that a code block a document says it
// quotes from a file (`<!-- quoted from PATH -->` right before it) is that
// file's text, verbatim: the compiled, tested code, not a copy that drifts.
func TestQuotedCodeIsTheCode(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
			n++
			src, err := os.ReadFile(filepath.Join("..", m[1]))
			if err != nil {
				t.Errorf("%s quotes %s: %v", d, m[1], err)
				continue
			}
			if !strings.Contains(string(src), m[2]) {
				t.Errorf("%s quotes code that %s does not hold verbatim:\n%s", d, m[1], m[2])
			}
		}
	}
	if n == 0 {
		t.Error("no document quotes code: the check checks nothing")
	}
}
