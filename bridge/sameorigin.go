package bridge

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
)

// originPolicy refuses what a web page on another site could make a
// browser send to the daemon. A browser attaches Origin to every
// cross-origin request and to every WebSocket handshake, so a request
// whose Origin is neither the daemon's own nor in allowed_origins is
// refused (403): a page cannot drive runs, read a thread's replay over
// WebSocket, or send a "simple" text/plain POST that needs no preflight.
// On a loopback listener the Host must be a loopback name or address:
// DNS rebinding makes a page's own origin resolve to 127.0.0.1, and only
// the Host it sends tells it apart. Allowed origins get CORS headers and
// their preflights are answered.
type originPolicy struct {
	loopback bool            // the listener is loopback
	allowed  map[string]bool // allowed_origins, as "scheme://host[:port]"
}

func newOriginPolicy(listen string, allowed []string) *originPolicy {
	p := &originPolicy{loopback: isLoopback(listen), allowed: map[string]bool{}}
	for _, o := range allowed {
		p.allowed[strings.TrimSuffix(o, "/")] = true
	}
	return p
}

func (p *originPolicy) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := p.refusal(r); msg != "" {
			writeRefusal(w, r, http.StatusForbidden, canonical.CodePermissionDenied, msg)
			return
		}
		if origin := r.Header.Get("Origin"); p.allowed[origin] {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Grpc-Status, Grpc-Message, Connect-Protocol-Version, Location")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if r.Method == http.MethodPost && simpleBody(r.Header.Get("Content-Type")) {
			writeRefusal(w, r, http.StatusUnsupportedMediaType, canonical.CodeInvalidArgument,
				fmt.Sprintf("Content-Type %q: send application/json (or the protocol's own type)", r.Header.Get("Content-Type")))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusal returns why r is refused, or "".
func (p *originPolicy) refusal(r *http.Request) string {
	if p.loopback && !loopbackHost(r.Host) {
		return fmt.Sprintf("Host %q is not a loopback name or address: this listener serves local clients only", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" || p.allowed[origin] || sameOrigin(origin, r.Host) {
		return ""
	}
	return fmt.Sprintf("cross-origin request from %q refused (allowed_origins lists the origins a browser may use)", origin)
}

// loopbackHost reports whether a Host header names this machine: localhost
// (and names under .localhost, RFC 6761), or a loopback address; an empty
// Host (HTTP/1.0, no browser) passes.
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether origin is the daemon's own: its host and port
// are the request's Host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// simpleBody reports whether a POST's type is one a page sends without a
// CORS preflight and no protocol here uses: text/plain and multipart
// forms. (application/x-www-form-urlencoded, also "simple", stays: it is
// what `curl -d` sends, and NVIDIA's Triton examples POST JSON so; the
// Origin check above covers pages.)
func simpleBody(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "text/plain" || mt == "multipart/form-data")
}
