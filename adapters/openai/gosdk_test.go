package openai_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// TestGoSDK drives the frontend with github.com/openai/openai-go/v3's chat
// client through a whole instance: New and NewStreaming against the
// scripted backend (echo) and, through a backend of type openai, the
// reference peer (parallel tool calls), the stream accumulator, an error
// after the first chunk, unknown model, models.
func TestGoSDK(t *testing.T) {
	_, srv := startPeer(t, peerModels...)
	cfg := peerConfig(t, srv.URL)
	cfg.Auth.Keys = []bridge.APIKey{{Name: "alice", Hash: bridge.KeyDigest("key-a")}}
	inst := bridgetest.Start(t, &cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(inst.URL+"/v1/"), option.WithAPIKey("key-a"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("brief"), openai.UserMessage("go says hi")}

	var raw *http.Response
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "echo", Messages: msgs}, option.WithResponseInto(&raw))
	if err != nil || c.Choices[0].Message.Content != "go says hi" || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("New: %v %+v", err, c)
	}
	if id := raw.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Fatalf("x-request-id %q", id)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "echo", Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "go says hi" || acc.Usage.CompletionTokens != 3 {
		t.Fatalf("stream: %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}

	// Parallel tool calls from the peer, accumulated.
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather"}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time"}),
	}
	stream = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "vllm-tools", Messages: msgs, Tools: tools})
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "chatcmpl-tool-1" || calls[0].Function.Arguments != `{"city":"Paris"}` ||
		calls[1].Function.Name != "get_time" || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("tool calls: %+v", acc.Choices[0])
	}

	// An error after the first chunk ends the stream with an error.
	stream = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "error-mid", Messages: msgs})
	text := ""
	for stream.Next() {
		if ch := stream.Current().Choices; len(ch) > 0 {
			text += ch[0].Delta.Content
			if ch[0].FinishReason != "" {
				t.Fatalf("finish_reason %q before the error", ch[0].FinishReason)
			}
		}
	}
	if stream.Err() == nil || text != "partial" {
		t.Fatalf("error-mid: %q %v", text, stream.Err())
	}

	var apiErr *openai.Error
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-9", Messages: msgs})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" ||
		!strings.HasPrefix(apiErr.Response.Header.Get("X-Request-Id"), "req_") {
		t.Fatalf("unknown model: %v", err)
	}
	m, err := client.Models.Get(ctx, "echo")
	if err != nil || m.OwnedBy != "interlingua" {
		t.Fatalf("models.get: %v %+v", err, m)
	}
}
