package bench

import (
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/interlingua-dev/interlingua/bench/load"
)

// noopProxy is the reference hop: the standard library's reverse proxy
// (net/http/httputil) in front of an upstream peer, passing requests and
// responses through unchanged and writing each chunk of a response the
// moment it is read (FlushInterval -1). It translates nothing, so the same
// load through it measures what a hop costs on this machine (a socket
// read, a socket write and a wake-up per delta, on both sides of a
// process); the bridged path's excess over it is what translating and
// everything else the instance does cost.
type noopProxy struct {
	srv  *load.Server
	tr   *http.Transport
	base string // the peer's base URL with the proxy's address
}

// newNoopProxy proxies to the peer at base (http:// or ws://). With h2c
// both of its sides speak HTTP/2 without TLS (gRPC needs it: Evergreen);
// otherwise HTTP/1.1, WebSocket upgrades included (Glide).
func newNoopProxy(base string, h2c bool, streams int) (*noopProxy, error) {
	up, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	scheme := up.Scheme
	if up.Scheme == "ws" {
		up.Scheme = "http"
	}
	tr := &http.Transport{
		MaxIdleConns: 2*streams + 16, MaxIdleConnsPerHost: 2*streams + 16,
		DisableCompression: true, IdleConnTimeout: time.Minute,
		WriteBufferSize: 4 << 10, ReadBufferSize: 32 << 10,
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(up) },
		Transport:     tr,
		FlushInterval: -1,
		// A client that ends its stream early is the harness's doing, not
		// the proxy's: nothing to log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	// Full duplex, as a hop must be: by default Go's HTTP/1 server drains
	// and closes a request body once the handler starts its response, and
	// a peer that answers before the transport has finished with the body
	// (the agent protocol's SSE streams do) then has its response cut
	// mid-stream when the transport's last read of the body fails and it
	// drops the upstream connection (golang/go#40747).
	fullDuplex := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 {
			_ = http.NewResponseController(w).EnableFullDuplex()
		}
		rp.ServeHTTP(w, r)
	})
	srv, err := load.Serve(fullDuplex, h2c)
	if err != nil {
		return nil, err
	}
	return &noopProxy{srv: srv, tr: tr, base: scheme + "://" + srv.Addr()}, nil
}

func (p *noopProxy) close() {
	p.srv.Close()
	p.tr.CloseIdleConnections()
}
