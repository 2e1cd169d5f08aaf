package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/interlingua-dev/interlingua/bridge"
	anthropicpeer "github.com/interlingua-dev/interlingua/conformance/peers/anthropic"
)

// --- Anthropic Messages: POST /v1/messages, SSE scanned for text_delta ---

type anthropicClient struct {
	cs clientSpec
	hc *http.Client
}

var (
	anthropicTextDelta  = []byte(`"type":"text_delta"`)
	anthropicErrorEvent = []byte(`{"type":"error"`)
)

func (c *anthropicClient) stream(ctx context.Context, _ int, prompt string, rec *recorder) error {
	body := map[string]any{"model": c.cs.target, "max_tokens": 4096, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": prompt}}}
	for k, v := range c.cs.params {
		body[k] = v // the frontend passes other scalar members on as parameters
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cs.base+"/v1/messages", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	rec.start = now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	stopped := false
	err = lines(resp.Body, func(line []byte) error {
		if !bytes.HasPrefix(line, dataPrefix) {
			return nil
		}
		data := bytes.TrimLeft(line[len(dataPrefix):], " ")
		switch {
		case bytes.HasPrefix(data, anthropicErrorEvent):
			return fmt.Errorf("error event: %s", data)
		case bytes.Contains(data, anthropicTextDelta):
			rec.delta()
		case bytes.HasPrefix(data, []byte(`{"type":"message_stop"`)):
			stopped = true
		}
		return nil
	})
	if err == nil && !stopped {
		err = fmt.Errorf("stream ended without message_stop")
	}
	return err
}

func (c *anthropicClient) close() { c.hc.CloseIdleConnections() }

// --- Anthropic: conformance/peers/anthropic, its text_delta events stamped ---

type anthropicUp struct {
	peer  *anthropicpeer.Peer
	srv   *server
	stamp *stampBook
}

func newAnthropicUp(sc script) (upstream, error) {
	deltas := make([]string, sc.deltas)
	for i := range deltas {
		deltas[i] = sc.text
	}
	u := &anthropicUp{
		peer: anthropicpeer.New("", anthropicpeer.Model{Name: benchTarget, Delay: sc.interval,
			Blocks: []anthropicpeer.Block{{Type: "text", Deltas: deltas}}}),
		stamp: newStampBook(sc.deltas),
	}
	var err error
	if u.srv, err = serve(u, false); err != nil {
		u.peer.Close()
		return nil, err
	}
	return u, nil
}

func (u *anthropicUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	st := u.stamp.get(lastUserText(body))
	if st == nil {
		u.peer.ServeHTTP(w, r)
		return
	}
	defer st.finish()
	u.peer.ServeHTTP(&eventStampWriter{ResponseWriter: w, st: st, key: anthropicTextDelta}, r)
}

// lastUserText is a Messages body's last user turn's text (a string or
// the text of its first text block).
func lastUserText(body []byte) string {
	var b struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Messages) == 0 {
		return ""
	}
	m := b.Messages[len(b.Messages)-1]
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(m.Content, &blocks)
	for _, bl := range blocks {
		if bl.Type == "text" {
			return bl.Text
		}
	}
	return ""
}

// eventStampWriter stamps each write (one whole SSE event) holding key.
type eventStampWriter struct {
	http.ResponseWriter
	st  *stamps
	key []byte
}

func (w *eventStampWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.key) {
		w.st.add()
	}
	return w.ResponseWriter.Write(p)
}

func (w *eventStampWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *eventStampWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (u *anthropicUp) backend() (bridge.BackendConfig, error) {
	o, err := options(map[string]any{"base_url": "http://" + u.srv.addr()})
	return bridge.BackendConfig{Type: "anthropic", Options: o}, err
}

func (u *anthropicUp) base() string     { return "http://" + u.srv.addr() }
func (u *anthropicUp) book() *stampBook { return u.stamp }
func (u *anthropicUp) close()           { u.peer.Close(); u.srv.close() }
