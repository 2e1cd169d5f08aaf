package glide

import (
	"fmt"
	"testing"

	"github.com/interlingua-dev/interlingua/bench/load"
)

// TestLoadStampConn feeds reference-peer-shaped frames of two interleaved
// requests to the load upstream's stamping conn and checks each stream's
// stamps and end.
func TestLoadStampConn(t *testing.T) {
	book := load.NewStampBook(4)
	a, b := book.Open("ka"), book.Open("kb")
	c := &stampConn{book: book, byID: map[string]*load.Stamps{}}
	frame := func(id, content, finish string) []byte {
		f := fmt.Sprintf(`{"id":%q,"created_at":1,"router_id":"bench","chunk":{"model_response":{"message":{"role":"assistant","content":%q}}`, id, content)
		if finish != "" {
			f += fmt.Sprintf(`,"finish_reason":%q`, finish)
		}
		return append([]byte{0x81, 0x7e, 0, 0}, f+"}}\n"...) // a frame header, then JSON
	}
	for _, f := range [][]byte{
		frame("1", "ka", ""), frame("2", "kb", ""), frame("1", "tok ", ""), frame("9", "unknown", ""),
		frame("2", "tok ", ""), frame("2", "tok ", ""), frame("1", "", "complete"),
		[]byte(`{"id":"2","error":{"name":"unknown_error","message":"x","finish_reason":"error"}}`),
	} {
		c.observe(f)
	}
	for name, st := range map[string]*load.Stamps{"a": a, "b": b} {
		select {
		case <-st.Done():
		default:
			t.Errorf("%s not finished", name)
		}
	}
	if len(a.Times()) != 2 || len(b.Times()) != 3 {
		t.Errorf("stamps: a %d (want 2), b %d (want 3)", len(a.Times()), len(b.Times()))
	}
	if len(c.byID) != 0 {
		t.Errorf("ids left: %v", c.byID)
	}
}
