package webhook_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/testenv"
)

// The front doors (the REST API here, the aggregated API in
// webhook/aggregated) only adapt requests: accepting an upload has one
// home, internal/uploads. A door that builds an Ingestion or writes a blob
// by itself has grown a second copy of the rule.
func TestFrontDoorsLeaveUseCasesToTheirPackages(t *testing.T) {
	const api = "github.com/posture-dev/posture/api/v1alpha1"
	for _, dir := range []string{"webhook", "webhook/aggregated"} {
		files, err := filepath.Glob(filepath.Join(testenv.Root(), dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			apiName := ""
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == api {
					apiName = "v1alpha1"
					if imp.Name != nil {
						apiName = imp.Name.Name
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Ingestion" {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == apiName && apiName != "" {
							t.Errorf("%s builds an Ingestion; creating one is internal/uploads' job", fset.Position(n.Pos()))
						}
					}
				case *ast.SelectorExpr:
					if n.Sel.Name == "PutBlob" {
						t.Errorf("%s writes a blob; streaming an upload is internal/uploads' job", fset.Position(n.Pos()))
					}
				}
				return true
			})
		}
	}
}
