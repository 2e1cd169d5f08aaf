package runner

import (
	"bytes"
	"encoding/xml"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// sampleReport has one of each outcome.
func sampleReport() *Report {
	c1 := &cases.Case{Case: &cv1.Case{Name: "text-stream", Description: "plain | text", Features: []string{"text"}}, Folder: "common"}
	c2 := &cases.Case{Case: &cv1.Case{Name: "replay", Description: "replay", Features: []string{"replay"}}, Folder: "native"}
	res := func(fe, be string, c *cases.Case, outcome, msg string) *Result {
		return &Result{Name: "bridge/frontend:" + fe + "/backend:" + be + "/" + c.GetName(), Frontend: fe, Backend: be,
			Case: c.GetName(), Features: c.GetFeatures(), Outcome: outcome, Message: msg, Duration: 1500 * time.Microsecond,
			Want: &cv1.Transcript{Status: transcript.Completed, Blocks: []*cv1.Block{{Type: "text", Text: "a"}}},
			Got:  &cv1.Transcript{Status: transcript.Completed, Blocks: []*cv1.Block{{Type: "text", Text: "b"}}}}
	}
	return &Report{Mode: ModeBridge, Cases: []*cases.Case{c1, c2}, Duration: time.Second, Results: []*Result{
		res("native", "canonical", c1, Pass, ""),
		res("native", "canonical", c2, Pass, ""),
		res("native", "triton", c1, Fail, "block 0: text differs"),
		res("native", "triton", c2, XFail, "block 0: text differs"),
		res("triton", "canonical", c1, XPass, "listed as known-failing, but passed"),
		res("triton", "canonical", c2, Skip, "the triton protocol has no replay"),
		res("triton", "triton", c1, Pass, ""),
	}}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.md", b.Bytes())
}

func TestWriteJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJUnit(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.junit.xml", b.Bytes())
	var v struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(b.Bytes(), &v); err != nil || v.Tests != 7 || v.Failures != 2 {
		t.Fatalf("JUnit: %+v, %v", v, err)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", b.Bytes())
	var v map[string]any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleReport(), false); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", b.Bytes())
}
