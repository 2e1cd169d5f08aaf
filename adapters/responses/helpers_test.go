package responses

import "github.com/interlingua-dev/interlingua/internal/json"

func jsonUnmarshalAny(b []byte, v *any) error { return json.Unmarshal(b, v) }

func jsonMarshalSorted(v any) ([]byte, error) { return json.Marshal(v, json.Deterministic(true)) }
