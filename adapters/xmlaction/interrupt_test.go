package xmlaction

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// TestEncodeInterrupt: an input request is rendered as an <interrupt>
// element with its id and payload, after the open block ends (issue 30
// #6), and the interrupted run's <error status="interrupted"> follows.
func TestEncodeInterrupt(t *testing.T) {
	payload, _ := structpb.NewValue(map[string]any{"question": "Approve <the> transfer?"})
	b := canonical.NewBuilder()
	var evs []*canonical.Event
	evs = b.StartMessage(evs, "m1", "assistant")
	evs = b.Text(evs, "Asking.")
	evs = b.Emit(evs, &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: "i-1", Payload: payload}}})
	evs = b.FinishBlock(evs)
	evs = b.FinishMessage(evs, canonical.FinishStop, nil)
	evs = b.End(evs, canonical.StatusInterrupted, nil)
	got := string(render(evs))
	want := "<response>Asking.</response>\n" +
		`<interrupt id="i-1">{"question":"Approve &lt;the> transfer?"}</interrupt>` + "\n" +
		`<error status="interrupted">the run is waiting for input</error>` + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
