package inspect_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/inspect"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Wire types of the API, as a script reads them (docs/inspector.md).
type (
	apiChunk struct {
		Dir    string  `json:"dir"`
		Head   bool    `json:"head"`
		Offset int64   `json:"offset"`
		Len    int     `json:"len"`
		Text   *string `json:"text"`
		Base64 []byte  `json:"base64"` // a chunk that is not UTF-8 (gRPC's protobuf)
	}
	apiEvent struct {
		Seq            uint64     `json:"seq"`
		Kind           string     `json:"kind"`
		Feature        string     `json:"feature"`
		Text           string     `json:"text"`
		ClientOffset   int64      `json:"client_offset"`
		UpstreamOffset int64      `json:"upstream_offset"`
		Event          json.Value `json:"event"`
	}
	apiRun struct {
		ID               string   `json:"id"`
		Target           string   `json:"target"`
		Frontend         string   `json:"frontend"`
		Backend          string   `json:"backend"`
		BackendType      string   `json:"backend_type"`
		Key              string   `json:"key"`
		Status           string   `json:"status"`
		TTFDMs           *float64 `json:"ttfd_ms"`
		Events           int      `json:"events"`
		UpstreamRecorded bool     `json:"upstream_recorded"`
		Truncated        []string `json:"truncated"`
	}
	apiNote struct {
		Features []string `json:"features"`
		Text     string   `json:"text"`
	}
	apiDetail struct {
		Run          apiRun     `json:"run"`
		Request      json.Value `json:"request"`
		Client       []apiChunk `json:"client"`
		Events       []apiEvent `json:"events"`
		Upstream     []apiChunk `json:"upstream"`
		Degradations struct {
			Frontend []apiNote `json:"frontend"`
			Backend  []apiNote `json:"backend"`
		} `json:"degradations"`
	}
	apiList struct {
		Runs []apiRun `json:"runs"`
	}
	apiError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
)

// bodyText joins the body bytes of a wire's chunks in direction dir.
func bodyText(chunks []apiChunk, dir string) string {
	var sb strings.Builder
	for _, c := range chunks {
		if c.Dir == dir && !c.Head && c.Text != nil {
			sb.WriteString(*c.Text)
		}
		if c.Dir == dir && !c.Head {
			sb.Write(c.Base64)
		}
	}
	return sb.String()
}

// A run that asks for capture is listed and opened for the admin key:
// its client wire, its canonical events and its upstream wire each hold
// the run's deltas in order, each event's offsets point into the wires,
// and the frontend's stated degradations come with it.
func TestCaptureThreeColumns(t *testing.T) {
	d := startDaemon(t, inspect.Config{}, true)
	events := runTriton(t, d, userKey, "demo-agent", true, nil)
	want := deltas(events)
	if len(want) < 3 {
		t.Fatalf("the Triton client read %d deltas: %v", len(want), events)
	}
	var list apiList
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs", adminKey, "", &list); st != 200 || len(list.Runs) != 1 {
		t.Fatalf("list: %d %+v", st, list)
	}
	r := list.Runs[0]
	if r.Target != "demo-agent" || r.Frontend != "triton" || r.Backend != "up" || r.BackendType != "agent" ||
		r.Key != "user" || r.Status != "completed" || r.TTFDMs == nil || r.Events == 0 {
		t.Fatalf("summary %+v", r)
	}
	var got apiDetail
	if st := apiDo(t, d, http.MethodGet, "/v1/inspect/runs/"+r.ID, adminKey, "", &got); st != 200 {
		t.Fatalf("open: %d", st)
	}
	t.Logf("deltas %q", want)
	if miss := inOrder(bodyText(got.Client, "out"), want); miss != "" {
		t.Errorf("client wire lacks delta %q in order: %s", miss, bodyText(got.Client, "out"))
	}
	var canon []string
	for _, e := range got.Events {
		if e.Kind == "block_delta" {
			canon = append(canon, e.Text)
		}
	}
	if miss := inOrder(strings.Join(canon, "\x00"), want); miss != "" {
		t.Errorf("canonical events lack delta %q in order: %q", miss, canon)
	}
	if !got.Run.UpstreamRecorded {
		t.Errorf("upstream wire not recorded for the agent backend")
	} else if miss := inOrder(bodyText(got.Upstream, "in"), want); miss != "" {
		t.Errorf("upstream wire lacks delta %q in order", miss)
	}
	checkOffsets(t, got)
	if !hasNote(got.Degradations.Frontend, "reasoning") || !hasNote(got.Degradations.Backend, "text") {
		t.Errorf("degradations %+v", got.Degradations)
	}
	if !strings.Contains(string(got.Request), `"target":"demo-agent"`) {
		t.Errorf("request %s", got.Request)
	}
}

// checkOffsets: offsets never decrease, and none lies past its wire.
func checkOffsets(t *testing.T, got apiDetail) {
	t.Helper()
	clientLen, upLen := int64(len(bodyText(got.Client, "out"))), int64(len(bodyText(got.Upstream, "in")))
	var lastC, lastU int64
	for _, e := range got.Events {
		if e.ClientOffset < lastC || e.ClientOffset > clientLen || (got.Run.UpstreamRecorded && (e.UpstreamOffset < lastU || e.UpstreamOffset > upLen)) {
			t.Fatalf("event %d: offsets client %d (after %d, of %d), upstream %d (after %d, of %d)", e.Seq, e.ClientOffset, lastC, clientLen, e.UpstreamOffset, lastU, upLen)
		}
		lastC, lastU = e.ClientOffset, e.UpstreamOffset
	}
}

func hasNote(notes []apiNote, feature string) bool {
	for _, n := range notes {
		for _, f := range n.Features {
			if f == feature {
				return true
			}
		}
	}
	return false
}
