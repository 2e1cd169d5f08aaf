package triton

import (
	"regexp"
	"strconv"
)

// modelVersion is the one version of every virtual model the frontend
// publishes.
const modelVersion = "1"

// tensorSpec is one input or output of the virtual model.
type tensorSpec struct {
	name     string
	datatype string
	shape    []int64
	elemSize int // bytes per element; 0 for BYTES
}

// single reports whether the tensor takes exactly one element per request
// (shape [-1, 1]: a batch dimension and one element).
func (t *tensorSpec) single() bool { return len(t.shape) == 2 && t.shape[1] == 1 }

// virtualInputs are the inputs of every virtual model (reference section
// 8.1): TRT-LLM-ensemble-style names and types, vLLM's sampling_parameters,
// with a batch dimension, so genai-perf, TRT-LLM and vLLM bodies are
// accepted unchanged. Only text_input is required.
var virtualInputs = []tensorSpec{
	{name: "text_input", datatype: "BYTES", shape: []int64{-1, 1}},
	{name: "max_tokens", datatype: "INT32", shape: []int64{-1, 1}, elemSize: 4},
	{name: "stream", datatype: "BOOL", shape: []int64{-1, 1}, elemSize: 1},
	{name: "bad_words", datatype: "BYTES", shape: []int64{-1, -1}},
	{name: "stop_words", datatype: "BYTES", shape: []int64{-1, -1}},
	{name: "temperature", datatype: "FP32", shape: []int64{-1, 1}, elemSize: 4},
	{name: "top_p", datatype: "FP32", shape: []int64{-1, 1}, elemSize: 4},
	{name: "top_k", datatype: "INT32", shape: []int64{-1, 1}, elemSize: 4},
	{name: "seed", datatype: "UINT64", shape: []int64{-1, 1}, elemSize: 8},
	{name: "exclude_input_in_output", datatype: "BOOL", shape: []int64{-1, 1}, elemSize: 1},
	{name: "sampling_parameters", datatype: "BYTES", shape: []int64{-1, 1}},
}

// virtualOutput is the one output of every virtual model.
var virtualOutput = tensorSpec{name: "text_output", datatype: "BYTES", shape: []int64{-1, -1}}

func inputSpec(name string) *tensorSpec {
	for i := range virtualInputs {
		if virtualInputs[i].name == name {
			return &virtualInputs[i]
		}
	}
	return nil
}

// tensorMetadata is one input or output in KServe model metadata.
type tensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// modelMetadataBody is KServe's model metadata.
type modelMetadataBody struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions"`
	Platform string           `json:"platform"`
	Inputs   []tensorMetadata `json:"inputs"`
	Outputs  []tensorMetadata `json:"outputs"`
}

func tensorsMetadata(specs []tensorSpec) []tensorMetadata {
	out := make([]tensorMetadata, len(specs))
	for i, s := range specs {
		out[i] = tensorMetadata{Name: s.name, Datatype: s.datatype, Shape: s.shape}
	}
	return out
}

// modelMetadata is the KServe model metadata of the virtual model name.
func modelMetadata(name string) []byte {
	return marshal(modelMetadataBody{
		Name:     name,
		Versions: []string{modelVersion},
		Platform: "interlingua",
		Inputs:   tensorsMetadata(virtualInputs),
		Outputs:  tensorsMetadata([]tensorSpec{virtualOutput}),
	})
}

// modelPath is Triton's model_regex_: a model name, an optional all-digit
// version and an optional kind.
var modelPath = regexp.MustCompile(`^/v2/models/([^/]+)(?:/versions/([0-9]+))?(?:/(infer|generate|generate_stream|ready|config|stats|trace/setting))?$`)

// healthPath is Triton's server_regex_.
var healthPath = regexp.MustCompile(`^/v2/health/(live|ready)$`)

// parseVersion is Triton's GetModelVersionFromString: "" is -1 (the
// server's choice); the route already guarantees digits.
func parseVersion(s string) (int64, string) {
	if s == "" {
		return -1, ""
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, "failed to get model version from specified version string '" + s +
			"' (details: stol), version should be an integral value > 0"
	}
	return v, ""
}
