package logging

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// snakeKey is the one spelling of log keys: lower-case words joined by
// underscores, so that journald fields (the keys upper-cased) read
// EXIT_CODE, NEXT_RETRY, and a key is spelled the same everywhere.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestLogKeysAreSnakeCase reads every slog call of the module (Info, Warn,
// Error, Debug and With with literal keys) and checks each key's spelling.
func TestLogKeysAreSnakeCase(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); strings.HasPrefix(name, ".") || name == "testdata" || (name == "node" && strings.HasSuffix(filepath.Dir(p), "hack")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "http" {
				return true // http.Error(w, message, code)
			}
			first := 1
			switch sel.Sel.Name {
			case "Info", "Warn", "Error", "Debug":
			case "With":
				first = 0
			default:
				return true
			}
			for i := first; i < len(call.Args); i += 2 {
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					break
				}
				key, _ := strconv.Unquote(lit.Value)
				checked++
				if !snakeKey.MatchString(key) {
					t.Errorf("%s: log key %q is not snake_case", fset.Position(lit.Pos()), key)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d log keys found: the walk missed the code", checked)
	}
}
