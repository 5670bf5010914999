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
// roles, and Room's own methods are in room.go (and set.go, as one room's Rooms).
func TestEachFileServesOneRole(t *testing.T) {
	pkg := parsePackage(t)
	seen := map[string]bool{}
	for path, f := range pkg.files {
		inFile := map[string]bool{}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			recv := receiverType(fn)
			seen[recv] = true
			if roles[recv] {
				inFile[recv] = true
			}
			if recv == "Room" && path != "room.go" && path != "set.go" {
				t.Errorf("%s: Room.%s belongs in room.go, with the rest of the composition", path, fn.Name.Name)
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

// TestEachRoleHoldsWhatItUses: a role holds its collaborators as named fields, each one it uses,
// and embeds nothing, so that a shared bag of state cannot come back and a feature has to say which
// role it grows. A field no method of the role reads fails, as does an embedded one, and a role
// that holds another role or the Room.
func TestEachRoleHoldsWhatItUses(t *testing.T) {
	pkg := parsePackage(t)
	for role := range roles {
		st, ok := pkg.types[role].(*ast.StructType)
		if !ok {
			t.Errorf("no struct type %s found: the test no longer sees the roles", role)
			continue
		}
		used := pkg.fieldsUsed(role)
		for _, field := range st.Fields.List {
			if len(field.Names) == 0 {
				t.Errorf("%s embeds %s: a role holds what it uses by name", role, typeText(field.Type))
				continue
			}
			ast.Inspect(field.Type, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && (roles[id.Name] || id.Name == "Room") {
					t.Errorf("%s holds a %s: the roles would reach each other around Room", role, id.Name)
				}
				return true
			})
			for _, name := range field.Names {
				if !used[name.Name] {
					t.Errorf("%s holds %s, which none of its methods uses: give it to the role that does", role, name.Name)
				}
			}
		}
	}
}

// TestOneFileWritesAnswers: herdgate's answers are values (answer.go), and one file turns them into
// bytes. No other file calls render, nor writes to an Exchange itself, so that no role answers
// piecemeal and every answer is counted once; the fronts write the Reply values they are given.
func TestOneFileWritesAnswers(t *testing.T) {
	writes := map[string]bool{"render": true, "Reply": true, "SetHeader": true, "SetCookie": true}
	pkg := parsePackage(t)
	for _, path := range slices.Sorted(maps.Keys(pkg.files)) {
		if path == "answer.go" {
			continue
		}
		ast.Inspect(pkg.files[path], func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				if fn.Name == "render" {
					t.Errorf("%s calls render: return an answer, and let answer.go write it", path)
				}
			case *ast.SelectorExpr:
				// x.Reply(...), x.SetHeader(...) on an Exchange: any receiver named like one.
				if id, ok := fn.X.(*ast.Ident); ok && writes[fn.Sel.Name] && (id.Name == "x" || id.Name == "w") {
					t.Errorf("%s writes %s.%s itself: return an answer, and let answer.go write it", path, id.Name, fn.Sel.Name)
				}
			}
			return true
		})
	}
}

// roles are the roles of a Room: the replica runtime is replica.Runtime, which reads the room
// through runtimeView.
var roles = map[string]bool{"gate": true, "visitorAPI": true, "runtimeView": true}

// parsedPackage is the package's files but its tests, and its types by name.
type parsedPackage struct {
	files map[string]*ast.File
	types map[string]ast.Expr
}

func parsePackage(t *testing.T) parsedPackage {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	pkg := parsedPackage{files: map[string]*ast.File{}, types: map[string]ast.Expr{}}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkg.files[path] = f
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok {
				for _, spec := range gd.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						pkg.types[ts.Name.Name] = ts.Type
					}
				}
			}
		}
	}
	return pkg
}

// fieldsUsed are the names selected on the receiver in the methods of typ: recv.name.
func (p parsedPackage) fieldsUsed(typ string) map[string]bool {
	used := map[string]bool{}
	for _, f := range p.files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || receiverType(fn) != typ || fn.Body == nil || len(fn.Recv.List[0].Names) == 0 {
				continue
			}
			recv := fn.Recv.List[0].Names[0].Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv {
						used[sel.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	return used
}

// typeText writes a type expression for a message.
func typeText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeText(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return typeText(e.X) + "." + e.Sel.Name
	}
	return "a field"
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
