package agent

import (
	"github.com/interlingua-dev/interlingua/canonical"
)

// wireRecords appends the agent-protocol events ev carries (wireExt, the
// agent runtime's encoding) to out, framed with ev's seq: one record each,
// its frame ready to send, but for a values event whose state is its
// checkpoint's (ref set, frame nil: the reader reads the record). An
// event the runtime did not encode carries none.
func wireRecords(ev *canonical.Event, out []record) []record {
	list := ev.GetExtensions()[wireExt].GetListValue().GetValues()
	for _, v := range list {
		f := v.GetStructValue().GetFields()
		w := wireEvent{method: f["m"].GetStringValue(), namespace: ev.GetNamespace(), node: ev.GetGraphNode(),
			timeMs: int64(f["t"].GetNumberValue()), custom: f["c"].GetStringValue(), status: f["s"].GetStringValue(), skip: int(f["k"].GetNumberValue())}
		if w.namespace == nil {
			w.namespace = []string{}
		}
		if ns := f["ns"].GetListValue(); ns != nil {
			w.namespace = make([]string, len(ns.GetValues()))
			for i, seg := range ns.GetValues() {
				w.namespace[i] = seg.GetStringValue()
			}
		}
		if n, ok := f["node"]; ok {
			w.node = n.GetStringValue()
		}
		rec := record{seq: ev.GetSeq(), method: w.method, custom: w.custom, ns: w.namespace, run: ev.GetRunId(), status: w.status}
		if d, ok := f["d"]; ok {
			w.data = []byte(d.GetStringValue())
			rec.frame = newFrame(ev.GetSeq(), &w)
		} else {
			rec.ref = f["ref"].GetStringValue()
			rec.wire = &w
		}
		out = append(out, rec)
	}
	return out
}
