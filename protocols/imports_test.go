package protocols

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/interlingua-dev/interlingua"

// listFile is the list, relative to the module's root.
const listFile = "protocols/protocols.go"

// listedPackage is what TestOneImporter reads of `go list -json`.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
}

// TestOneImporter holds issue 29 §1: a protocol is one folder and one
// value, so exactly one non-test file outside adapters/<p>/ imports
// adapters/<p>, the same file for every protocol: protocols.go, the list.
func TestOneImporter(t *testing.T) {
	pkgs := listModule(t)
	importers := map[string][]string{} // adapter package -> files outside it importing it
	for _, p := range pkgs {
		if !slices.ContainsFunc(p.Imports, isAdapter) {
			continue
		}
		for _, f := range append(p.GoFiles, p.CgoFiles...) {
			path := filepath.Join(p.Dir, f)
			for _, imp := range fileImports(t, path) {
				if !isAdapter(imp) || adapterOf(p.ImportPath) == imp {
					continue
				}
				rel := strings.TrimPrefix(p.ImportPath+"/"+f, module+"/")
				importers[imp] = append(importers[imp], rel)
				if rel != listFile {
					t.Errorf("%s imports %s: only %s may import an adapter", rel, imp, listFile)
				}
			}
		}
	}
	var adapters []string
	for _, p := range pkgs {
		if isAdapter(p.ImportPath) {
			adapters = append(adapters, p.ImportPath)
		}
	}
	if len(adapters) < 5 {
		t.Fatalf("go list found %d adapter packages, want the whole tree", len(adapters))
	}
	for _, a := range adapters {
		if !slices.Contains(importers[a], listFile) {
			t.Errorf("%s is not in the list (%s)", a, listFile)
		}
	}
}

// isAdapter reports whether path is a protocol package, adapters/<p>.
func isAdapter(path string) bool {
	rest, ok := strings.CutPrefix(path, module+"/adapters/")
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// adapterOf returns the adapter whose folder holds package path, or "".
func adapterOf(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/adapters/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return module + "/adapters/" + name
}

func listModule(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func fileImports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", path, imp.Path.Value, err)
		}
		out = append(out, p)
	}
	return out
}
