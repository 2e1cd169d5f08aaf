package runner

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/interlingua-dev/interlingua/conformance/transcript"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// WriteSummary writes one line of counts.
func WriteSummary(w io.Writer, r *Report) error {
	_, err := fmt.Fprintf(w, "%s mode: %d cases: %d passed, %d failed, %d known-failing, %d unexpected passes, %d skipped (%s)\n",
		r.Mode, len(r.Results), r.Count(Pass), r.Count(Fail), r.Count(XFail), r.Count(XPass), r.Count(Skip), r.Duration.Round(1e6))
	return err
}

// WriteText writes each failure (with its expected and received
// transcripts and, when traced, its trace), then the summary; allTraces
// shows every case's trace.
func WriteText(w io.Writer, r *Report, allTraces bool) error {
	for _, res := range r.Results {
		if !res.Failed() && !(allTraces && res.Trace != "") {
			continue
		}
		fmt.Fprintf(w, "%s %s\n", strings.ToUpper(res.Outcome), res.Name)
		if res.Message != "" {
			fmt.Fprintf(w, "  %s\n", res.Message)
		}
		if res.Outcome == Fail && res.Want != nil && res.Got != nil {
			fmt.Fprintf(w, "  want: %s\n  got:  %s\n", oneLine(transcript.String(res.Want)), oneLine(transcript.String(res.Got)))
		}
		if res.Trace != "" {
			fmt.Fprintf(w, "  trace:\n%s\n", res.Trace)
		}
	}
	return WriteSummary(w, r)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// WriteJSON writes the results as JSON.
func WriteJSON(w io.Writer, r *Report) error {
	type jsonResult struct {
		Name       string     `json:"name"`
		Frontend   string     `json:"frontend"`
		Backend    string     `json:"backend"`
		Case       string     `json:"case"`
		Features   []string   `json:"features,omitempty"`
		Outcome    string     `json:"outcome"`
		Message    string     `json:"message,omitempty"`
		DurationMs float64    `json:"duration_ms"`
		Want       json.Value `json:"want,omitzero"`
		Got        json.Value `json:"got,omitzero"`
		Trace      string     `json:"trace,omitempty"`
	}
	out := struct {
		Mode     string       `json:"mode"`
		Passed   int          `json:"passed"`
		Failed   int          `json:"failed"`
		Skipped  int          `json:"skipped"`
		Known    int          `json:"known_failing"`
		XPassed  int          `json:"unexpected_passes"`
		Results  []jsonResult `json:"results"`
		Duration float64      `json:"duration_ms"`
	}{Mode: r.Mode, Passed: r.Count(Pass), Failed: r.Count(Fail), Skipped: r.Count(Skip), Known: r.Count(XFail), XPassed: r.Count(XPass),
		Duration: float64(r.Duration.Microseconds()) / 1000}
	for _, res := range r.Results {
		jr := jsonResult{Name: res.Name, Frontend: res.Frontend, Backend: res.Backend, Case: res.Case, Features: res.Features,
			Outcome: res.Outcome, Message: res.Message, DurationMs: float64(res.Duration.Microseconds()) / 1000, Trace: res.Trace}
		if res.Failed() {
			if res.Want != nil {
				jr.Want = json.Value(transcript.String(res.Want))
			}
			if res.Got != nil {
				jr.Got = json.Value(transcript.String(res.Got))
			}
		}
		out.Results = append(out.Results, jr)
	}
	return json.MarshalEncode(json.NewEncoder(w, reportOptions), out)
}

// reportOptions write the report as encoding/json's Encoder with
// SetIndent("", "  ") wrote it (testdata/report.json): two-space indent,
// <, >, &, U+2028 and U+2029 escaped, the transcripts' strings otherwise
// kept as spelled, no results as null; the Encoder ends it with a newline.
var reportOptions = json.JoinOptions(json.WithIndent("  "), json.EscapeForHTML(true), json.EscapeForJS(true),
	json.PreserveRawStrings(true), json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true),
	json.FormatNilSliceAsNull(true))

// WriteJUnit writes the results as JUnit XML: a test suite per pair.
func WriteJUnit(w io.Writer, r *Report) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      float64  `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Skipped   *failure `xml:"skipped,omitempty"`
		SystemOut string   `xml:"system-out,omitempty"`
	}
	type suite struct {
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	type suites struct {
		XMLName  xml.Name `xml:"testsuites"`
		Name     string   `xml:"name,attr"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Suites   []*suite `xml:"testsuite"`
	}
	out := suites{Name: "interlingua conformance " + r.Mode}
	bySuite := map[string]*suite{}
	for _, res := range r.Results {
		cls := strings.TrimSuffix(res.Name, "/"+res.Case)
		s := bySuite[cls]
		if s == nil {
			s = &suite{Name: cls}
			bySuite[cls] = s
			out.Suites = append(out.Suites, s)
		}
		tc := testcase{Name: res.Case, Classname: cls, Time: res.Duration.Seconds(), SystemOut: res.Trace}
		switch {
		case res.Failed():
			body := res.Message
			if res.Want != nil && res.Got != nil {
				body += "\nwant: " + transcript.String(res.Want) + "\ngot: " + transcript.String(res.Got)
			}
			tc.Failure = &failure{Message: res.Outcome, Text: body}
			s.Failures++
			out.Failures++
		case res.Outcome == Skip || res.Outcome == XFail:
			tc.Skipped = &failure{Message: res.Outcome + ": " + res.Message}
			s.Skipped++
		}
		s.Tests++
		out.Tests++
		s.Cases = append(s.Cases, tc)
	}
	sort.Slice(out.Suites, func(i, j int) bool { return out.Suites[i].Name < out.Suites[j].Name })
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
