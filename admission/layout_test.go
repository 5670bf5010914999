package admission_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestTheGateImportsNoFront: the gate decides over an Exchange; what carries bytes (fasthttp,
// net/http's reverse proxy, the fronts themselves) is never among its dependencies, so that a new
// front is an adapter and the gate does not change for it. Nor is what hosts it in Kubernetes
// (controller-runtime, client-go, admission/host): the gate takes its config from anywhere.
func TestTheGateImportsNoFront(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	deps, err := testenv.Deps("github.com/herdgate/herdgate/admission")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range deps {
		switch {
		case dep == "net/http/httputil", strings.HasPrefix(dep, "github.com/valyala/fasthttp"),
			strings.HasPrefix(dep, "github.com/herdgate/herdgate/admission/front"),
			strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime"), strings.HasPrefix(dep, "k8s.io/client-go"),
			dep == "github.com/herdgate/herdgate/admission/host":
			t.Errorf("the gate depends on %s", dep)
		}
	}
}

// TestEachFileServesOneRole: a room's roles (the gate, the visitor API, the replica runtime) meet
// only in Room, so that whoever changes one reads its files alone. No file holds methods of two
// roles, Room's own methods are in room.go (and set.go, as one room's Rooms), and the state the
// roles share holds none of them.
func TestEachFileServesOneRole(t *testing.T) {
	roles := map[string]bool{"gate": true, "visitorAPI": true, "replicaRuntime": true}
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		inFile := map[string]bool{}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				recv := receiverType(decl)
				seen[recv] = true
				if roles[recv] {
					inFile[recv] = true
				}
				if recv == "Room" && path != "room.go" && path != "set.go" {
					t.Errorf("%s: Room.%s belongs in room.go, with the rest of the composition", path, decl.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "roomState" {
						ast.Inspect(ts.Type, func(n ast.Node) bool {
							if id, ok := n.(*ast.Ident); ok && (roles[id.Name] || id.Name == "Room") {
								t.Errorf("%s: roomState holds a %s: the roles would reach each other around Room", path, id.Name)
							}
							return true
						})
					}
				}
			}
		}
		if len(inFile) > 1 {
			t.Errorf("%s holds methods of %d roles (%v); give each its own file", path, len(inFile), slices.Sorted(maps.Keys(inFile)))
		}
	}
	for role := range roles {
		if !seen[role] {
			t.Errorf("no methods of %s found: the test no longer sees the roles", role)
		}
	}
}

// receiverType is the name of a method's receiver type; "" for a function.
func receiverType(decl *ast.FuncDecl) string {
	if decl.Recv == nil || len(decl.Recv.List) == 0 {
		return ""
	}
	typ := decl.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
