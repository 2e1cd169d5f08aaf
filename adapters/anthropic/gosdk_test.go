package anthropic_test

import (
	"context"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// TestGoSDK drives the official Go SDK (anthropic-sdk-go v2): its
// stream reader and Message.Accumulate, which refuse out-of-order
// indexes, over the scripted agent and the peer's tools and thinking
// through the anthropic backend; then a non-streaming create.
func TestGoSDK(t *testing.T) {
	inst, _ := startWithPeer(t, "go-key")
	client := sdk.NewClient(option.WithBaseURL(inst.URL), option.WithAPIKey("go-key"), option.WithMaxRetries(0))
	ctx := context.Background()
	got := map[string]any{}
	for _, model := range []string{"demo-agent", "peer-tools", "peer-thinking", "peer-usage"} {
		params := sdk.MessageNewParams{
			Model: sdk.Model(model), MaxTokens: 4096, Thinking: sdk.ThinkingConfigParamOfEnabled(1024),
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("what is 6*7?"))},
		}
		if model == "peer-tools" { // the client's tools: their calls are tool_use
			params.Tools = []sdk.ToolUnionParam{sdk.ToolUnionParamOfTool(sdk.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "get_weather"),
				sdk.ToolUnionParamOfTool(sdk.ToolInputSchemaParam{Properties: map[string]any{}}, "get_time")}
		}
		stream := client.Messages.NewStreaming(ctx, params)
		var msg sdk.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatalf("%s: Accumulate: %v", model, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s: stream: %v", model, err)
		}
		var v any
		if err := json.Unmarshal([]byte(msg.RawJSON()), &v); err != nil {
			// Accumulate builds the struct, not its raw JSON: marshal it.
			b, _ := json.Marshal(msg)
			_ = json.Unmarshal(b, &v)
		}
		got[model] = v
	}
	m, err := client.Messages.New(ctx, sdk.MessageNewParams{
		Model: "peer-thinking", MaxTokens: 4096, Thinking: sdk.ThinkingConfigParamOfEnabled(1024),
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("again"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(m.RawJSON()), &v); err != nil {
		t.Fatal(err)
	}
	got["create"] = v
	out, _ := json.Marshal(got, json.Deterministic(true))
	golden(t, "sdk/go_sdk.golden", append(out, '\n'))
}
