package agent

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
)

// The end the bridge makes for a run whose owner went quiet (a failed
// message's finish, then the failed lifecycle) is encoded by the reader:
// the message's error frame takes the finish's seq, the lifecycle its
// own, so no two frames share an event_id (a client resuming after the
// first would otherwise never see the run fail).
func TestReaderEncodedEndFramesOwnSeqs(t *testing.T) {
	evs, _ := quietEndedRun(t)
	tr := newTestReader()
	var recs []record
	for _, ev := range evs {
		recs = tr.encode(ev, recs)
	}
	var last uint64
	var errSeq, failSeq uint64
	for _, r := range recs {
		if r.seq <= last {
			t.Fatalf("frame seq %d after %d: %s", r.seq, last, r.frame)
		}
		last = r.seq
		switch {
		case r.method == methodMessages && strings.Contains(string(r.frame), `"event":"error"`):
			errSeq = r.seq
		case r.status == "failed":
			failSeq = r.seq
		}
	}
	finish := uint64(0)
	for _, ev := range evs {
		if mf := ev.GetMessageFinish(); mf != nil && mf.GetFinishReason() == canonical.FinishError {
			finish = ev.GetSeq()
		}
	}
	if errSeq == 0 || errSeq != finish || failSeq != evs[len(evs)-1].GetSeq() {
		t.Fatalf("error frame at %d (message finish %d), failed at %d (end %d)", errSeq, finish, failSeq, evs[len(evs)-1].GetSeq())
	}
}

// A reader that sees only the bridge-made end of a run the runtime
// encoded (its block's start was the runtime's frame) makes no frame of
// the block's finish: the next frame says which seq came before it
// (prev_seq), as the runtime's frames do, so a reader of every event
// tells the skip from a loss.
func TestReaderEncodedEndSaysWhatItSkipped(t *testing.T) {
	evs, ran := quietEndedRun(t)
	tr := newTestReader()
	var recs []record
	for _, ev := range evs[ran:] { // the runtime framed the rest
		recs = tr.encode(ev, recs)
	}
	if len(recs) == 0 {
		t.Fatal("no frame")
	}
	seen := map[uint64]bool{}
	for _, r := range recs {
		seen[r.seq] = true
	}
	skipped := 0
	for _, ev := range evs[ran:] {
		if ev.GetSeq() < recs[0].seq && !seen[ev.GetSeq()] {
			skipped++
		}
	}
	want := `"prev_seq":` + strconv.Itoa(ran)
	if skipped == 0 || !strings.Contains(string(recs[0].frame), want) {
		t.Fatalf("%d events before the first frame made none; first frame %s, want %s", skipped, recs[0].frame, want)
	}
}

// quietEndedRun is a run's events, numbered from 1, that end with the end
// the bridge makes for a run whose owner went quiet in a text block; ran
// is how many came before that end.
func quietEndedRun(t *testing.T) (evs []*canonical.Event, ran int) {
	t.Helper()
	b := canonical.NewBuilder()
	evs = b.Lifecycle(nil, canonical.StatusRunning)
	evs = b.StartMessage(evs, "m1", "assistant")
	evs = b.Text(evs, "partial")
	var g canonical.Guard
	for _, ev := range evs {
		if e := g.Observe(ev); e != nil {
			t.Fatal(e)
		}
	}
	ran = len(evs)
	evs = g.End(evs, canonical.StatusFailed, canonical.Errorf(canonical.CodeUnavailable, "run owner sent neither event nor heartbeat for 3s"))
	for i, ev := range evs {
		ev.Seq = uint64(i + 1)
	}
	return evs, ran
}

// newTestReader is a tail reader with no observer, for encode alone.
func newTestReader() *tailReader {
	return &tailReader{f: &Frontend{cfg: Config{Now: time.Now, Logger: slog.New(slog.DiscardHandler)}}}
}

// The end another instance appends for a run whose owner died is
// numbered after the seqs the owner may have given its own clients, and
// says it skips them (Event.skipped_after): the reader's first frame of
// it says which seq came before it (prev_seq), so a client decoding every
// event (Decoder.Contiguous) reads across with no loss. A reader resumed
// from inside the skipped seqs (a client that read them from the dead
// owner) is told its own last seq.
func TestReaderAcrossAnOwnersSkipSaysPrevSeq(t *testing.T) {
	evs, ran := quietEndedRun(t)
	const skip = 1000
	for _, ev := range evs[ran:] {
		ev.Seq += skip
	}
	evs[ran].SkippedAfter = proto.Uint64(uint64(ran))
	for _, c := range []struct {
		name  string
		at    uint64
		polls []*canonical.Event
	}{
		{"reader of every event", 0, evs},
		{"reader resumed inside the skip", uint64(ran) + 5, evs[ran:]},
	} {
		tr := newTestReader()
		tr.ctx, tr.at, tr.obs = t.Context(), c.at, &fixedPoller{evs: c.polls}
		recs, _, _, err := tr.readOnce(func(*record) bool { return true }, nil)
		if err != nil {
			t.Fatal(err)
		}
		prev := c.at
		for _, r := range recs {
			if r.seq <= uint64(ran) {
				prev = r.seq
				continue
			}
			want := `"prev_seq":` + strconv.FormatUint(prev, 10) + `,`
			if !strings.Contains(string(r.frame), want) {
				t.Fatalf("%s: the first frame after the skip is %s, want %s", c.name, r.frame, want)
			}
			break
		}
		dec := &Decoder{Contiguous: true, AfterSeq: c.at}
		var got []*canonical.Event
		for _, r := range recs {
			if got, err = dec.feed(r.frame, got); err != nil {
				t.Fatalf("%s: a Contiguous decoder of the frames: %v", c.name, err)
			}
		}
	}
}

// fixedPoller is an observer that has evs, then nothing.
type fixedPoller struct {
	canonical.Stream
	evs []*canonical.Event
}

func (p *fixedPoller) Poll(out []*canonical.Event, max int) ([]*canonical.Event, error) {
	n := min(max, len(p.evs))
	out, p.evs = append(out, p.evs[:n]...), p.evs[n:]
	return out, nil
}

func (p *fixedPoller) Notify(func()) {}
