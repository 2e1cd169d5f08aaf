package responses

import (
	"context"
	"errors"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// recordKey is the thread-store key of a stored response; its thread is
// the response id (also the thread of the response's run, so the bridge's
// claim of the thread for the API key that created it covers the record).
const recordKey = "response"

// record is a stored response: the response object, the input items of
// its request, and the items before them in its conversation (the inputs
// and outputs of the responses it continues), so previous_response_id
// continues with context + input + output in one read.
type record struct {
	Owner    string   `json:"owner"`
	Response response `json:"response"`
	Input    []item   `json:"input"`
	Context  []item   `json:"context"`
}

// conversation is the items a response continuing this one starts from.
func (r *record) conversation() []item {
	out := make([]item, 0, len(r.Context)+len(r.Input)+len(r.Response.Output))
	out = append(out, r.Context...)
	out = append(out, r.Input...)
	return append(out, r.Response.Output...)
}

// item is the item of the stored response's conversation (its output,
// input and context) whose id is id; false when there is none (or r is
// nil).
func (r *record) item(id string) (item, bool) {
	if r == nil {
		return item{}, false
	}
	for _, items := range [][]item{r.Response.Output, r.Input, r.Context} {
		for _, it := range items {
			if it.ID == id {
				return it, true
			}
		}
	}
	return item{}, false
}

// store keeps responses in the bridge's thread store.
type store struct {
	ts    canonical.ThreadStore
	check func(ctx context.Context, thread string) error
	max   int
}

// owner is the name of the caller's API key, "" when auth is off.
func owner(ctx context.Context) string {
	if p := canonical.PrincipalFrom(ctx); p != nil {
		return p.Name
	}
	return ""
}

// validID reports whether id can name a response of ours: resp_ and
// base32 (anything else is not found, without a store read).
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "resp_")
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	return strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz234567") == ""
}

var errNotFound = canonical.Errorf(canonical.CodeNotFound, "response not found")

// load reads the caller's stored response id: CodeNotFound when there is
// none, or it is another API key's.
func (s *store) load(ctx context.Context, id string) (*record, uint64, *canonical.Error) {
	if s.ts == nil || !validID(id) {
		return nil, 0, errNotFound
	}
	data, rev, err := s.ts.Get(ctx, id, recordKey)
	if err != nil {
		if canonical.CodeOf(err) == canonical.CodeNotFound {
			return nil, 0, errNotFound
		}
		return nil, 0, canonical.AsError(err)
	}
	if s.check != nil {
		if err := s.check(ctx, id); err != nil {
			if canonical.CodeOf(err) == canonical.CodeNotFound {
				return nil, 0, errNotFound
			}
			return nil, 0, canonical.AsError(err)
		}
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, 0, canonical.Errorf(canonical.CodeDataLoss, "the stored response %s cannot be read", id)
	}
	if rec.Owner != owner(ctx) {
		return nil, 0, errNotFound
	}
	return &rec, rev, nil
}

// save writes rec at revision rev (0: a new record) and returns the new
// revision; a record over the limit is refused with ResourceExhausted.
func (s *store) save(ctx context.Context, rec *record, rev uint64) (uint64, *canonical.Error) {
	data, err := json.Marshal(rec, json.Deterministic(true))
	if err != nil {
		return 0, canonical.Errorf(canonical.CodeInternal, "the response cannot be stored: %v", err)
	}
	if len(data) > s.max {
		return 0, canonical.Errorf(canonical.CodeResourceExhausted, "the stored conversation exceeds max_stored_bytes (%d)", s.max)
	}
	n, err := s.ts.Put(ctx, rec.Response.ID, recordKey, data, rev)
	if err != nil {
		return 0, canonical.AsError(err)
	}
	return n, nil
}

// remove deletes a stored response's records.
func (s *store) remove(ctx context.Context, id string) *canonical.Error {
	if err := s.ts.DeleteThread(ctx, id); err != nil && !errors.Is(err, context.Canceled) {
		return canonical.AsError(err)
	}
	return nil
}
