package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// locksFile is the lock inventory (STYLE: "Keep lock order in internal/broker/LOCKS.md"),
// relative to the module root.
const locksFile = "internal/broker/LOCKS.md"

// moduleRoot is the module's root directory, two levels above this package.
const moduleRoot = "../.."

// TestLocksFileListsEveryMutex parses every non-test Go file of the module and fails for
// each sync.Mutex or sync.RWMutex (or ranked lockorder.Mutex/RWMutex) — a struct field (named or embedded) or a package-level
// variable — that LOCKS.md does not name as `package.Type.field` (or `package.var`), and
// for each name LOCKS.md gives in that form whose mutex no longer exists. LOCKS.md claims
// to list every mutex; this keeps the claim true as code changes.
func TestLocksFileListsEveryMutex(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot, locksFile))
	if err != nil {
		t.Fatal(err)
	}
	found := mutexes(t, moduleRoot)
	if len(found) < 10 {
		t.Fatalf("found only %d mutexes; is the module root right?", len(found))
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)+)`").FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	for _, name := range found {
		if !listed[name] {
			t.Errorf("%s does not list `%s`: add it where it nests (or to the independent leaves)", locksFile, name)
		}
	}
	// A listed name that looks like a mutex (package.Type.field with a lock's field name) but
	// is none in the code is stale.
	for name := range listed {
		parts := strings.Split(name, ".")
		if len(parts) != 3 || !isLockField(parts[2]) {
			continue
		}
		if !slices.Contains(found, name) {
			t.Errorf("%s lists `%s`, which is no mutex in the code any more", locksFile, name)
		}
	}
}

// isLockField reports whether a field name is one this repository gives mutexes (mu, smu,
// rmu, settingsMu, …), so that the stale check ignores other dotted names in LOCKS.md.
func isLockField(name string) bool {
	l := strings.ToLower(name)
	return strings.HasSuffix(l, "mu") || l == "mutex" || l == "rwmutex"
}

// mutexes returns, sorted, the name of every sync.Mutex and sync.RWMutex declared in the
// non-test Go files under root: package.Type.field for struct fields (the embedded field's
// name is Mutex or RWMutex), package.var for package-level variables.
func mutexes(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					st, ok := s.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fld := range st.Fields.List {
						kind, ok := syncLock(fld.Type)
						if !ok {
							continue
						}
						if len(fld.Names) == 0 {
							out = append(out, pkg+"."+s.Name.Name+"."+kind)
						}
						for _, n := range fld.Names {
							out = append(out, pkg+"."+s.Name.Name+"."+n.Name)
						}
					}
				case *ast.ValueSpec:
					if _, ok := syncLock(s.Type); ok && gd.Tok == token.VAR {
						for _, n := range s.Names {
							out = append(out, pkg+"."+n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// syncLock reports whether expr is a lock — sync.Mutex or sync.RWMutex, or a ranked
// lockorder.Mutex[R] or lockorder.RWMutex[R] (sync's under another name, checked under the
// invariants tag) — and which kind.
func syncLock(expr ast.Expr) (string, bool) {
	pkg := "sync"
	if ix, ok := expr.(*ast.IndexExpr); ok {
		expr, pkg = ix.X, "lockorder"
	}
	sel, ok := expr.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok || x.Name != pkg || (sel.Sel.Name != "Mutex" && sel.Sel.Name != "RWMutex") {
		return "", false
	}
	return sel.Sel.Name, true
}
