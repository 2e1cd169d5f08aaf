package canonical

import (
	"fmt"
	"sort"
)

// Violation is a broken invariant: the rule, and the event that broke it.
type Violation struct {
	// Seq is the offending event's seq (0 when the stream is unsequenced).
	Seq uint64
	// Index is the offending event's position in the stream, from 0.
	Index int
	Run   string
	Rule  string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("event %d (seq %d, run %q): %s", v.Index, v.Seq, v.Run, v.Rule)
}

// Validator checks the canonical invariants on a stream of events:
//
//   - seq strictly increases per thread (when the stream carries seqs);
//   - blocks of one message never interleave, indexes count up from 0, and
//     every start has one finish with deltas only between;
//   - every text delta is whole UTF-8, and deltas match their block's type;
//   - a failed lifecycle and an error event carry a code;
//   - every run has exactly one terminal root lifecycle event, it is the
//     run's last, and nothing is left open when it comes.
//
// A Validator is not safe for concurrent use.
type Validator struct {
	lastSeq map[string]uint64
	runs    map[string]*runState
	n       int
}

// NewValidator returns an empty Validator.
func NewValidator() *Validator {
	return &Validator{lastSeq: map[string]uint64{}, runs: map[string]*runState{}}
}

// Check checks the next event and returns the first violation, or nil.
func (v *Validator) Check(ev *Event) error {
	i := v.n
	v.n++
	fail := func(rule string) error {
		return &Violation{Seq: ev.GetSeq(), Index: i, Run: ev.GetRunId(), Rule: rule}
	}
	th := ev.GetThreadId()
	if last, ok := v.lastSeq[th]; ok && (ev.GetSeq() != 0 || last != 0) && ev.GetSeq() <= last {
		return fail(fmt.Sprintf("seq %d after seq %d in thread %q (must strictly increase)", ev.GetSeq(), last, th))
	}
	v.lastSeq[th] = ev.GetSeq()
	r := v.runs[ev.GetRunId()]
	if r == nil {
		r = &runState{}
		v.runs[ev.GetRunId()] = r
	}
	if rule := r.apply(ev); rule != "" {
		return fail(rule)
	}
	return nil
}

// End reports a run that never reached its terminal event.
func (v *Validator) End() error {
	ids := make([]string, 0, len(v.runs))
	for id, r := range v.runs {
		if !r.terminal {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Strings(ids)
	return &Violation{Index: v.n, Run: ids[0], Rule: "stream ended without the run's terminal lifecycle event"}
}

// Validate checks a whole stream, End included.
func Validate(events []*Event) error {
	v := NewValidator()
	for _, ev := range events {
		if err := v.Check(ev); err != nil {
			return err
		}
	}
	return v.End()
}
