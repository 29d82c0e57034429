package admit_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeMethods are the store's methods that change the desired state.
var writeMethods = map[string]bool{"Upsert": true, "UpsertMany": true, "Withdraw": true, "WithdrawMany": true, "WithdrawSeen": true}

// One door: no product package but admit (and store itself) calls a
// method of the store that changes the desired state, directly on a
// *store.Store or through an interface whose method takes the store's
// write types. Tests may set up state as they like; product code may not.
func TestOnlyTheGateWrites(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-export", "-f",
		"{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .GoFiles \",\"}}\t{{.Standard}}", "github.com/ribkeeper/ribkeeper/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	type pkg struct {
		path, dir string
		files     []string
	}
	var ours []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("go list line %q", line)
		}
		exports[f[0]] = f[1]
		if strings.HasPrefix(f[0], "github.com/ribkeeper/ribkeeper") && !strings.HasSuffix(f[0], "/admit") && !strings.HasSuffix(f[0], "/store") && f[3] != "" {
			ours = append(ours, pkg{f[0], f[2], strings.Split(f[3], ",")})
		}
	}
	if len(ours) < 10 {
		t.Fatalf("only %d packages listed: %v", len(ours), ours)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	calls := 0
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.path, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.path, err)
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !writeMethods[sel.Sel.Name] {
					return true
				}
				calls++
				if fn, ok := info.Uses[sel.Sel].(*types.Func); ok && storeWrite(fn) {
					t.Errorf("%s: %s calls the store's %s: every write goes through admit.Gate",
						fset.Position(call.Pos()), p.path, fn.FullName())
				}
				return true
			})
		}
	}
	if calls == 0 {
		t.Fatal("no call named like a write method found at all: the check is not looking")
	}
}

// storeWrite reports whether fn is one of the store's write methods, or an
// interface method with the signature of one.
func storeWrite(fn *types.Func) bool {
	sig := fn.Type().(*types.Signature)
	if recv := sig.Recv(); recv != nil && strings.Contains(recv.Type().String(), "ribkeeper/store.Store") {
		return true
	}
	return strings.Contains(sig.String(), "ribkeeper/store.Input") ||
		strings.Contains(sig.String(), "ribkeeper/store.WithdrawItem") ||
		sig.Params().Len() == 3 && sig.Results().Len() == 2 &&
			strings.HasSuffix(sig.Results().At(0).Type().String(), "ribkeeper/store.Rule") &&
			sig.Params().At(1).Type().String() == "int64"
}

// The guardrails are the gate's: no product package but admit imports
// guard, so none can check (or forget to check) them on its own.
func TestOnlyTheGateAppliesGuardrails(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "github.com/ribkeeper/ribkeeper/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const guard = "github.com/ribkeeper/ribkeeper/guard"
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		seen++
		if pkg == "github.com/ribkeeper/ribkeeper/admit" || pkg == guard {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == guard {
				t.Errorf("%s imports guard: apply the guardrails through admit.Gate", pkg)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d packages listed", seen)
	}
}
