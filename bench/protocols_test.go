package bench

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/interlingua-dev/interlingua/protocols"
)

// harnessFiles are the harness's non-test sources: this package, the load
// package and the CLI's bench command.
func harnessFiles(t *testing.T) []string {
	var files []string
	for _, pattern := range []string{"*.go", "load/*.go", "../cmd/interlingua/bench.go"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found %d harness files: %v", len(files), files)
	}
	return files
}

// TestHarnessNamesNoProtocol holds issue 29's rule that the protocol list
// is the only place outside an adapter's folder that names a protocol:
// no non-test source of the harness imports an adapter or a reference
// peer, holds a string literal that is a protocol's name, or names one as
// a proper noun in its text (Triton, Glide, ...); what it drives comes
// from the protocol values.
func TestHarnessNamesNoProtocol(t *testing.T) {
	names := map[string]bool{}
	for _, p := range protocols.All {
		names[strings.ToLower(p.Name)] = true
	}
	fset := token.NewFileSet()
	for _, file := range harnessFiles(t) {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, "/adapters/") || strings.Contains(path, "/conformance/peers/") {
				t.Errorf("%s imports %s", file, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if names[strings.ToLower(s)] {
				t.Errorf("%s: the string literal %s names a protocol", fset.Position(lit.Pos()), lit.Value)
			}
			for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
				if unicode.IsUpper(rune(w[0])) && names[strings.ToLower(w)] {
					t.Errorf("%s: %q in %s names a protocol", fset.Position(lit.Pos()), w, lit.Value)
				}
			}
			return true
		})
	}
}

// TestEveryProtocolHasALoad: every protocol with a frontend has a load
// client, and every one with a frontend and a backend a reference upstream
// as well, so the harness can drive it both ways and against its direct
// path; one frontend is the report's reference and one backend is
// scripted.
func TestEveryProtocolHasALoad(t *testing.T) {
	refs, scripted := 0, 0
	for i := range protocols.All {
		p := &protocols.All[i]
		l := p.Load
		switch {
		case p.Mount != nil && (l == nil || l.NewClient == nil):
			t.Errorf("%s has a frontend and no load client (Load.NewClient)", p.Name)
		case p.Mount != nil && p.NewBackend != nil && l.NewUpstream == nil:
			t.Errorf("%s has a frontend and a backend and no load upstream (Load.NewUpstream)", p.Name)
		}
		if l != nil && l.Reference {
			refs++
		}
		if l != nil && l.Scripted {
			scripted++
		}
	}
	if refs != 1 || scripted != 1 {
		t.Errorf("%d reference frontends and %d scripted backends, want one each", refs, scripted)
	}
	if len(matrixPeers) == 0 {
		t.Error("no protocol is in the report's same-protocol scenarios (a frontend, a backend and Load.NewUpstream)")
	}
}
