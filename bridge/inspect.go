package bridge

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/inspect"
)

// newInspector returns the inspector of an enabled config, nil when it is
// off. It may be used by admin keys, or by anyone when auth is off (which
// NewServer allows on a loopback listener only).
func newInspector(cfg Config, log *slog.Logger) *inspect.Inspector {
	if !cfg.Inspector.Enabled {
		return nil
	}
	admins := map[string]bool{}
	for _, k := range cfg.Auth.Keys {
		admins[k.Name] = admins[k.Name] || k.Admin
	}
	authOff := len(cfg.Auth.Keys) == 0
	loopback := isLoopback(cfg.Listen)
	return inspect.New(cfg.Inspector, inspect.Deps{
		Log: log.With("component", "inspector"),
		Admin: func(ctx context.Context) bool {
			p := canonical.PrincipalFrom(ctx)
			if p == nil {
				return authOff && loopback
			}
			return admins[p.Name]
		},
		BackendType: func(name string) string { return cfg.Backends[name].Type },
	})
}

// inspectorHandler is the server's handler around the frontends' mux,
// with auth when it is on and the inspector when it is enabled: its API on
// the mux (behind auth), the client-wire tee inside auth, the static page
// outside it (the page sends the key itself).
func (s *Server) inspectorHandler(cfg Config, mux *http.ServeMux, auth *authenticator, log *slog.Logger) http.Handler {
	withAuth := func(h http.Handler) http.Handler {
		if auth == nil {
			return h
		}
		return auth.middleware(h, log)
	}
	s.bridge.inspect = newInspector(cfg, log)
	in := s.bridge.inspect
	if in == nil {
		return withAuth(apiNotFound(mux))
	}
	in.Mount(mux)
	return in.Page(withAuth(in.Tee(apiNotFound(mux))))
}
