package textarena

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Strings from the arena keep their bytes while later ones fill and
// replace chunks; long texts are copied on their own.
func TestStringsStayIntact(t *testing.T) {
	var a Arena
	var got, want []string
	for i := range 2000 {
		s := strings.Repeat(string(rune('a'+i%26)), i%1500)
		b := []byte(s)
		got = append(got, a.String(b))
		clear(b) // the arena copied it
		want = append(want, s)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("string %d changed: %q, want %q", i, got[i], want[i])
		}
	}
	if a.String(nil) != "" {
		t.Fatal("empty text")
	}
}

// Short texts cost one allocation per chunk, not one each.
func TestAllocationsPerChunk(t *testing.T) {
	var a Arena
	b := []byte("tok ")
	n := testing.AllocsPerRun(1000, func() { _ = a.String(b) })
	if n > float64(len(b))/Chunk*2+0.01 {
		t.Fatalf("%v allocations per 4-byte text", n)
	}
}

func BenchmarkString(b *testing.B) {
	var a Arena
	text := []byte(" token")
	b.ReportAllocs()
	for b.Loop() {
		_ = a.String(text)
	}
}
