package wsconn_test

import (
	"log/slog"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// A frontend handler: the handler's goroutine reads, any goroutine sends,
// and Close flushes what was queued.
func Example() {
	var up websocket.Upgrader
	logger := slog.New(slog.DiscardHandler)
	handler := func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // Upgrade has replied
		}
		c := wsconn.New(ws, wsconn.Config{Logger: logger})
		defer c.Close(wsconn.CloseNormal, "")
		for {
			_, msg, err := c.Read(r.Context())
			if err != nil {
				logger.Debug("websocket ended", "code", wsconn.CloseCode(err))
				return
			}
			// Runs would answer from their own goroutines; Send never blocks.
			if err := c.SendText(msg); err != nil {
				return // the Conn has ended (slow consumer): stop the runs
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", handler)
}
