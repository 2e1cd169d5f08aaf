package leaktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIgnoredFunctionExists: the function ignored is in the nats.go this
// module builds with, where its leak was read; after an upgrade that
// renames or removes it, this fails, and the ignore is looked at again.
func TestIgnoredFunctionExists(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/nats-io/nats.go").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "jetstream", "publish.go"))
	if err != nil {
		t.Fatal(err)
	}
	name := natsAsyncReplyReset[strings.LastIndex(natsAsyncReplyReset, ".")+1:]
	if !strings.Contains(string(src), "func (js *jetStream) "+name+"()") || !strings.Contains(string(src), "go js."+name+"()") {
		t.Fatalf("nats.go's jetstream/publish.go has no goroutine %s: the ignore in Upstream is stale", name)
	}
}
