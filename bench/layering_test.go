package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// TestInternalImportsNoUpperLayer holds issue 29's layering rule: a package
// under internal/ is a leaf helper and imports nothing from bridge,
// adapters or conformance, neither directly nor through another package,
// and neither do its tests. The load harness lived in internal/ and broke
// the rule; it is here, in bench/, so the check sits where it would return.
func TestInternalImportsNoUpperLayer(t *testing.T) {
	const module = "github.com/interlingua-dev/interlingua/"
	// Deps is the transitive closure of the non-test imports; the test
	// files' own imports are listed separately.
	format := `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`
	out, err := exec.Command("go", "list", "-f", format, module+"internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 {
		t.Fatalf("go list found %d internal packages, want the whole tree:\n%s", len(lines), out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			for _, upper := range []string{"bridge", "adapters", "conformance"} {
				if dep == module+upper || strings.HasPrefix(dep, module+upper+"/") {
					t.Errorf("%s imports %s", fields[0], dep)
				}
			}
		}
	}
}
