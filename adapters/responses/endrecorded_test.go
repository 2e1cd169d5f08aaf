package responses

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// TestEndSentAfterItIsRecorded: a client that reads a stored response's
// end from the stream and at once retrieves it finds it completed, with
// its output, even when recording the end is slow (300 ms here) and the
// response.completed event is larger than what the SSE writer holds back
// (sse.BatchBytes), which it sends at once.
func TestEndSentAfterItIsRecorded(t *testing.T) {
	text := strings.Repeat("forty-two ", 6<<10) // 60 KiB
	store := &memStore{slowUpdate: 300 * time.Millisecond}
	mux := http.NewServeMux()
	f := NewFrontend(FrontendConfig{Runner: slowRunner{text: text}, Store: store})
	f.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer f.Close()
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var completed struct {
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	p, buf := &sse.Parser{MaxEventBytes: 1 << 20}, make([]byte, 4096)
	for completed.Response.ID == "" {
		n, err := resp.Body.Read(buf)
		evs, perr := p.Feed(buf[:n], nil)
		if perr != nil {
			t.Fatal(perr)
		}
		for _, ev := range evs {
			if ev.Event == "response.completed" {
				if err := json.Unmarshal([]byte(ev.Data), &completed); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err != nil && completed.Response.ID == "" {
			t.Fatalf("the stream ended without response.completed: %v", err)
		}
	}
	got, err := http.Get(srv.URL + "/v1/responses/" + completed.Response.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	var rec response
	if err := json.UnmarshalRead(got.Body, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status != "completed" || len(rec.Output) != 1 {
		t.Fatalf("retrieved right after response.completed: status %q, %d output items", rec.Status, len(rec.Output))
	}
}

// memStore is a canonical.ThreadStore in memory whose updates (Puts over
// a revision) take slowUpdate.
type memStore struct {
	slowUpdate time.Duration
	mu         sync.Mutex
	recs       map[[2]string]memRecord
}

type memRecord struct {
	value []byte
	rev   uint64
}

func (s *memStore) Get(_ context.Context, thread, key string) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[[2]string{thread, key}]
	if !ok {
		return nil, 0, canonical.Errorf(canonical.CodeNotFound, "no record %q", key)
	}
	return r.value, r.rev, nil
}

func (s *memStore) Put(_ context.Context, thread, key string, value []byte, expectRev uint64) (uint64, error) {
	if expectRev > 0 {
		time.Sleep(s.slowUpdate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{thread, key}
	if s.recs[k].rev != expectRev {
		return 0, canonical.Errorf(canonical.CodeAborted, "record %q is at revision %d", key, s.recs[k].rev)
	}
	if s.recs == nil {
		s.recs = map[[2]string]memRecord{}
	}
	s.recs[k] = memRecord{value: value, rev: expectRev + 1}
	return expectRev + 1, nil
}

func (s *memStore) Delete(_ context.Context, thread, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, [2]string{thread, key})
	return nil
}

func (s *memStore) Keys(context.Context, string, string) ([]string, error) { return nil, nil }

func (s *memStore) DeleteThread(_ context.Context, thread string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.recs {
		if k[0] == thread {
			delete(s.recs, k)
		}
	}
	return nil
}
