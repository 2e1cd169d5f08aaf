package triton

import (
	"bytes"
	"testing"
)

// FuzzStreamedResponse: a streamed response built from the template
// (streamed) is byte for byte the response the Encoder writes for the same
// members, whatever the text (escapes, invalid UTF-8) and the id.
func FuzzStreamedResponse(f *testing.F) {
	for _, s := range []string{"tok ", "", "a\"b\\c\n\x00\u2028<>&", "\xff\xfe bad", "日本語"} {
		f.Add("", "m", s)
		f.Add("req-1", "model \"q\"", s)
	}
	f.Fuzz(func(t *testing.T, id, model, text string) {
		e := newResponseEncoder(id, model, true, false, "", 1<<20)
		for range 2 { // the second delta reuses the template
			got := bytes.Clone(streamed(e, text))
			var ref bufEncoder
			want := ref.marshal(&textResponse{ID: id, ModelName: model, ModelVersion: modelVersion, TextOutput: text})
			if !bytes.Equal(got, want) {
				t.Fatalf("streamed(%q) = %s, want %s", text, got, want)
			}
		}
	})
}
