package bridge

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// AuthConfig configures API keys. Auth is on when any key is configured;
// with none it is off, which the daemon allows only on a loopback listener.
type AuthConfig struct {
	Keys []APIKey `yaml:"keys"`
}

// APIKey is one key: give exactly one of Hash, Env or File.
type APIKey struct {
	// Name identifies the key in logs; threads and sessions belong to it.
	Name string `yaml:"name"`
	// Hash is "sha256:<hex>" of the key (printf %s KEY | sha256sum).
	Hash string `yaml:"hash"`
	// Env names an environment variable holding the key.
	Env string `yaml:"env"`
	// File names a file holding the key (trailing newline ignored).
	File string `yaml:"file"`
	// Targets the key may use: names or globs; empty means all.
	Targets []string `yaml:"targets"`
	// MaxRuns bounds the key's concurrent runs. Default 256.
	MaxRuns int `yaml:"max_runs"`
	// MaxObservers bounds the key's open thread observers (replays, live
	// event streams, every agent-protocol SSE stream and WebSocket).
	// Default 4,096. (An instance holds one JetStream consumer while it
	// has observers, however many threads they observe.)
	MaxObservers int `yaml:"max_observers"`
	// Admin lets the key use the inspector (/inspect, /v1/inspect/), which
	// shows every key's captured runs. Default false.
	Admin bool `yaml:"admin"`
}

// authenticator checks API keys against their SHA-256 digests.
type authenticator struct {
	keys []authKey
}

type authKey struct {
	digest    [sha256.Size]byte
	principal *canonical.Principal
}

// newAuthenticator resolves the configured keys; nil when auth is off.
func newAuthenticator(cfg AuthConfig) (*authenticator, error) {
	if len(cfg.Keys) == 0 {
		return nil, nil
	}
	a := &authenticator{}
	named := map[string]int{} // index by name
	for i, k := range cfg.Keys {
		field := fmt.Sprintf("auth.keys[%d]", i)
		if k.Name == "" {
			return nil, fmt.Errorf("%s.name is empty", field)
		}
		// Threads, runs, responses and admin rights belong to a name: two
		// keys of one name would silently be one tenant.
		if j, dup := named[k.Name]; dup {
			return nil, fmt.Errorf("%s.name %q is auth.keys[%d]'s too: each key needs a name of its own (--api-key keys are cli-1, cli-2, ...; INTERLINGUA_API_KEY's is env, INTERLINGUA_API_KEY_FILE's file)", field, k.Name, j)
		}
		named[k.Name] = i
		n := 0
		for _, s := range []string{k.Hash, k.Env, k.File} {
			if s != "" {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("%s: give exactly one of hash, env, file", field)
		}
		var d [sha256.Size]byte
		switch {
		case k.Hash != "":
			hexed, ok := strings.CutPrefix(k.Hash, "sha256:")
			b, err := hex.DecodeString(hexed)
			if !ok || err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s.hash: want sha256:<64 hex digits>", field)
			}
			copy(d[:], b)
		case k.Env != "":
			v := os.Getenv(k.Env)
			if v == "" {
				return nil, fmt.Errorf("%s.env: $%s is empty", field, k.Env)
			}
			d = sha256.Sum256([]byte(v))
		default:
			b, err := os.ReadFile(k.File)
			if err != nil {
				return nil, fmt.Errorf("%s.file: %w", field, err)
			}
			v := strings.TrimRight(string(b), "\r\n")
			if v == "" {
				return nil, fmt.Errorf("%s.file: %s is empty", field, k.File)
			}
			d = sha256.Sum256([]byte(v))
		}
		a.keys = append(a.keys, authKey{digest: d, principal: &canonical.Principal{Name: k.Name, Targets: k.Targets,
			MaxRuns: cmp.Or(k.MaxRuns, 256), MaxObservers: cmp.Or(k.MaxObservers, 4096)}})
	}
	return a, nil
}

// lookup returns the principal of a presented key, comparing digests in
// constant time.
func (a *authenticator) lookup(key string) *canonical.Principal {
	if key == "" {
		return nil
	}
	d := sha256.Sum256([]byte(key))
	var found *canonical.Principal
	for _, k := range a.keys {
		if subtle.ConstantTimeCompare(d[:], k.digest[:]) == 1 {
			found = k.principal
		}
	}
	return found
}

// presentedKey reads the key from Authorization: Bearer, x-api-key, or
// (for WebSocket upgrades, whose browser clients cannot set headers) ?key=.
func presentedKey(r *http.Request) string {
	// The scheme is case-insensitive (RFC 7235 §2.1).
	if scheme, v, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(v)
	}
	if v := r.Header.Get("X-Api-Key"); v != "" {
		return v
	}
	if isWebSocketUpgrade(r) {
		return r.URL.Query().Get("key")
	}
	return ""
}

// openPaths need no key: probes and metrics.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// middleware authenticates every request except probes, puts the principal
// in the context, and refuses others in their protocol's error form.
func (a *authenticator) middleware(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		p := a.lookup(presentedKey(r))
		if p == nil {
			log.Info("unauthenticated request refused", "path", r.URL.Path, "remote", r.RemoteAddr)
			writeUnauthenticated(w, r, "missing or invalid API key (send Authorization: Bearer <key>, or x-api-key: <key>)")
			return
		}
		next.ServeHTTP(w, r.WithContext(canonical.WithPrincipal(r.Context(), p)))
	})
}

// writeUnauthenticated refuses a request without a valid key (401, with
// WWW-Authenticate on HTTP APIs).
func writeUnauthenticated(w http.ResponseWriter, r *http.Request, msg string) {
	writeRefusal(w, r, http.StatusUnauthorized, canonical.CodeUnauthenticated, msg)
}

// writeRefusal answers a request the server refuses before any frontend
// sees it, in the error form of the protocol the request is for (by its
// Content-Type or path: protocol.For); the canonical form when none claims
// it. A WebSocket upgrade is refused before the handshake.
func writeRefusal(w http.ResponseWriter, r *http.Request, status int, code canonical.Code, msg string) {
	ref := protocol.Refusal{Status: status, Code: code, Message: msg}
	if p := protocol.For(protocols.All, r); p != nil && p.WriteRefusal != nil {
		p.WriteRefusal(w, r, ref)
		return
	}
	protocol.WriteCanonicalRefusal(w, r, ref)
}

// isLoopback reports whether a listen address only accepts local clients.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// KeyDigest returns the config form of a key's hash, for --api-key.
func KeyDigest(key string) string {
	d := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(d[:])
}
