package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFunctionLines is the length past which a product function needs its reason in CONTRIBUTING.md.
const maxFunctionLines = 80

// TestLongFunctionsAreExplained: every product function (not a test's, a generated one's or the
// test kit's) longer than maxFunctionLines has a row in CONTRIBUTING.md's table of them, which says
// why it is one function, and every row names a function that is still that long.
func TestLongFunctionsAreExplained(t *testing.T) {
	root := repoRoot(t)
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	long := map[string]bool{}
	for _, src := range files(t, root, ".go") {
		if strings.HasSuffix(src, "_test.go") || strings.HasPrefix(src, "test/") || strings.HasPrefix(src, "hack/") || strings.HasPrefix(filepath.Base(src), "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, src), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFunctionLines {
				row := fmt.Sprintf("| `%s` `%s` |", filepath.ToSlash(src), fn.Name.Name)
				long[row] = true
				if !strings.Contains(string(contributing), row) {
					t.Errorf("%s: %s is %d lines; split it, or say why it is one function in CONTRIBUTING.md (a row starting %q)", src, fn.Name.Name, n, row)
				}
			}
		}
	}
	for _, line := range strings.Split(string(contributing), "\n") {
		if strings.HasPrefix(line, "| `") && strings.Count(line, "`") >= 4 && strings.Contains(line, ".go` `") {
			row := line[:strings.Index(line, "` |")+3]
			if !long[row] {
				t.Errorf("CONTRIBUTING.md explains %s, which is no longer over %d lines: drop the row", row, maxFunctionLines)
			}
		}
	}
}
