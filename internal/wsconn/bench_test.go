package wsconn_test

import (
	"io"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// BenchmarkSend measures a 100-byte text frame from Send to a client that
// reads it, end to end over loopback, on a Conn from Upgrade (frames queued
// together go out in one write) and from New (a write per frame). The
// sender holds a credit per frame in flight and the reader returns it, so
// the queue never overflows. Allocations are the whole process's: they
// include the client's read (gorilla's NextReader allocates one reader per
// message).
func BenchmarkSend(b *testing.B) {
	b.Run("Upgrade", func(b *testing.B) { benchmarkSend(b, pair) })
	b.Run("New", func(b *testing.B) { benchmarkSend(b, plainPair) })
}

func benchmarkSend(b *testing.B, pair func(testing.TB, wsconn.Config) (*wsconn.Conn, *websocket.Conn)) {
	c, client := pair(b, wsconn.Config{})
	credits := make(chan struct{}, 128) // half the default SendQueue
	read := make(chan error, 1)
	go discard(client, b.N, credits, read)
	msg := make([]byte, 100)
	for i := range msg {
		msg[i] = 'a' + byte(i%26)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		credits <- struct{}{}
		if err := c.Send(b.Context(), websocket.TextMessage, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-read; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// discard reads n messages from client, returning a credit for each, and
// reports the first error.
func discard(client *websocket.Conn, n int, credits <-chan struct{}, done chan<- error) {
	for range n {
		_, r, err := client.NextReader()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			done <- err
			return
		}
		<-credits
	}
	done <- nil
}
