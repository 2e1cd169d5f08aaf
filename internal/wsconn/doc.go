// Package wsconn wraps a gorilla/websocket (v1.5.3, RFC 6455) connection for
// Interlingua's WebSocket frontends (LangChain agent protocol, Glide
// chatStream, Evergreen proto3-JSON) and backend clients, server or client
// side alike, enforcing two rules those packages would otherwise each
// re-implement. Subprotocols and compression stay with the caller's
// websocket.Upgrader or websocket.Dialer; a server upgrades with Upgrade, a
// client dials and wraps the connection with New.
//
// One writer. gorilla/websocket (doc.go, "Concurrency") allows one concurrent
// caller of the write methods and one of the read methods; only Close and
// WriteControl may be called from anywhere. A Conn therefore has one
// writer, writeLoop, that owns every write it makes: data frames queued by
// Send, pings on a timer, and the close frame. The writer is a goroutine
// that runs only while there is something to write (it looks once more
// before it stops, so nothing queued waits), so an idle connection costs
// no goroutine of its own beyond its reader's. Send may be called
// from any number of goroutines (Glide multiplexes many request ids on one
// socket); frames from one goroutine go out in the order that goroutine
// queued them, and frames are never interleaved. The only frames written
// elsewhere are the control frames gorilla itself writes with WriteControl
// while reading: pong replies, the echo of a peer's close frame, and the
// 1009 or 1002 close it sends when a message is too big or malformed.
//
// Writes in bursts. gorilla/websocket writes each frame to the network
// connection with its own write, a syscall per streamed delta. A server-side
// Conn made by Upgrade (the frontends') instead puts the frames the writer
// finds queued together, and any control frame gorilla writes meanwhile, on
// the wire in one write, up to 64 KiB at a time. A frame is never held back
// waiting for one that has not been queued, so a lone delta goes out at once.
// A Conn made by New over a dialled connection writes frame by frame.
//
// Bounded buffers, slow consumers cut off. Frames wait for the writer in a
// queue of Config.SendQueue frames. Send never blocks and never grows the
// queue: when it is full the peer is not keeping up, and, as nats-server does
// with a client past MaxPending, the connection is cut off. Send returns an
// *Error with close code 1008 (policy violation) whose cause is
// ErrSlowConsumer and canonical code ResourceExhausted, and the peer receives
// close 1008 "send queue full (N frames)". A single write blocked longer
// than Config.WriteTimeout is treated the same way. Incoming messages are
// limited to Config.MaxMessageBytes, checked from the frame header before the
// payload is read; a larger one closes the connection with 1009.
//
// Liveness. The writer pings every Config.PingInterval; each Read, and each
// pong received during it, moves the read deadline to twice that interval
// ahead, so a peer that sends nothing, pongs included, is cut off with 1008.
// Pongs are only processed while someone is in Read, so the owner of a Conn
// must keep reading.
//
// Ending. A Conn ends once: by Close, by a failed Send, by a Read error (the
// peer's close frame, a dropped connection, a missed pong, an oversized
// message) or by cancellation of the context given to Read. Err reports
// which; Done is closed when the writer has exited and the network
// connection is closed. Close flushes the frames already queued before the
// close frame, within Config.CloseGrace; the other endings drop them.
//
// Limits. The send queue is bounded in frames, not bytes: a frame's size is
// the sender's business (each protocol caps what it produces). A frame
// queued after the Conn started to end is dropped even if Send returned nil.
//
// Errors. Endings decided on this side are *Error values carrying the close
// code sent and a *canonical.Error cause; a close frame received from the
// peer (or gorilla's 1006 for a connection dropped without one) is the
// *websocket.CloseError gorilla returns. CloseCode reads the code from
// either. Mapping a peer's close code to a canonical code is left to each
// protocol's errors.go.
package wsconn
