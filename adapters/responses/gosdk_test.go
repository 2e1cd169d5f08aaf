package responses_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestGoSDK drives the frontend with github.com/openai/openai-go/v3's
// responses client through a whole instance: New, NewStreaming, Get,
// Delete, previous_response_id, a function call round trip, a second key
// refused.
func TestGoSDK(t *testing.T) {
	p := startPeer(t)
	cfg := peerConfig(t, p)
	cfg.Auth.Keys = aliceAndBob()
	inst := bridgetest.Start(t, &cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newClient := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(inst.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	alice, bob := newClient("key-a"), newClient("key-b")

	first, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("go first")}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != "completed" || first.OutputText() != "echo: go first" {
		t.Fatalf("New: %s %q", first.Status, first.OutputText())
	}

	// Streamed, continuing the first.
	stream := alice.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("go second")}, PreviousResponseID: openai.String(first.ID)})
	var text, last string
	var seq int64
	var id string
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		last = ev.Type
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			id = ev.Response.ID
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "echo: go second" || last != "response.completed" {
		t.Fatalf("stream: %q, last %s", text, last)
	}
	got, err := alice.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "echo: go second" || got.PreviousResponseID != first.ID {
		t.Fatalf("Get: %v %+v", err, got)
	}

	// A function call, answered with its output.
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	call, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")}})
	if err != nil || len(call.Output) != 1 || call.Output[0].Type != "function_call" || call.Output[0].Arguments.OfString != `{"city":"Paris"}` {
		t.Fatalf("function call: %v %+v", err, call)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("15C")
	out.OfFunctionCallOutput.CallID = openai.String(call.Output[0].CallID)
	answer, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", Tools: tools, PreviousResponseID: openai.String(call.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
	if err != nil || answer.OutputText() != "echo: weather?" {
		t.Fatalf("answer: %v %+v", err, answer)
	}

	// Another key: not found, and cannot continue it.
	var apiErr *openai.Error
	if _, err := bob.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 ||
		!strings.HasPrefix(apiErr.Response.Header.Get("X-Request-Id"), "req_") {
		t.Fatalf("bob's Get: %v", err)
	}
	_, err = bob.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "previous_response_not_found" {
		t.Fatalf("bob's chain: %v", err)
	}
	if err := alice.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("Get after Delete: %v", err)
	}
}
