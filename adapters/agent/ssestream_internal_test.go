package agent

import "testing"

// TestSSEWriterMissesNoKick: a kick that comes while the stream's writer
// runs (events appended after it last read) keeps it running for one more
// look; with none it goes idle, and kicks past the first while it runs
// ask for no more than one look.
func TestSSEWriterMissesNoKick(t *testing.T) {
	var s sseStream
	s.state.Store(writerRunning)
	if !s.rest() {
		t.Fatal("an unkicked writer did not go idle")
	}
	s.state.Store(writerRunning)
	s.kick()
	s.kick()
	if s.rest() {
		t.Fatal("the writer went idle with a kick unseen")
	}
	if !s.rest() {
		t.Fatal("two kicks while running asked for two more looks")
	}
	if st := s.state.Load(); st != writerIdle {
		t.Fatalf("state %d, want idle", st)
	}
}
