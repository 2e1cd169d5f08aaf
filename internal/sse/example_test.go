package sse_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/interlingua-dev/interlingua/internal/sse"
)

func ExampleWriter() {
	rec := httptest.NewRecorder() // an http.ResponseWriter that can flush
	w, err := sse.NewWriter(rec)
	if err != nil {
		panic(err)
	}
	sse.SetHeaders(rec.Header())
	_ = w.Comment("ping")
	_ = w.Event("1", "delta", []byte("two\nlines"))
	_ = w.Data([]byte(`{"text_output":"hi"}`))
	fmt.Printf("%q\n", rec.Body.String())
	// Output:
	// ": ping\n\nid: 1\nevent: delta\ndata: two\ndata: lines\n\ndata: {\"text_output\":\"hi\"}\n\n"
}

func ExampleParser() {
	p := sse.Parser{KeepComments: true}
	var events []sse.Event
	// Chunks may be cut anywhere, even inside a CRLF.
	for _, chunk := range []string{": ping\r", "\n\r\nevent: delta\r\nid: 1\r\ndata: a\r\nda", "ta: b\r\n\r", "\ndata: tail"} {
		var err error
		if events, err = p.Feed([]byte(chunk), events); err != nil {
			panic(err)
		}
	}
	events, err := p.End(events) // "data: tail" has no blank line: discarded
	if err != nil {
		panic(err)
	}
	for _, e := range events {
		if e.IsComment {
			fmt.Printf("comment %q\n", e.Comment)
			continue
		}
		fmt.Printf("event %q id %q data %q\n", e.Event, e.ID, e.Data)
	}
	// Output:
	// comment "ping"
	// event "delta" id "1" data "a\nb"
}
