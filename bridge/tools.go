package bridge

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/builtin"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/tracing"
)

// maxToolBytes bounds tool arguments and results.
const maxToolBytes = 1 << 20

// ToolRegistry implements canonical.Tools over the allowlist: built-in tools
// run in process; any other allowed name is a NATS micro service on
// <prefix>.tool.<name> (request/reply, JSON in and out), so tools can be
// written in any language and scaled by running more copies.
type ToolRegistry struct {
	allow   []string
	builtin map[string]builtin.Func
	nc      *nats.Conn
	prefix  string
	timeout time.Duration
	log     *slog.Logger
}

// NewToolRegistry returns the registry; nc may be nil (built-ins only).
func NewToolRegistry(cfg ToolsConfig, nc *nats.Conn, prefix string, log *slog.Logger) *ToolRegistry {
	return &ToolRegistry{
		allow: cfg.Allow, builtin: builtin.Tools(time.Now), nc: nc, prefix: prefix,
		timeout: cfg.Timeout, log: log,
	}
}

// Call implements canonical.Tools.
func (t *ToolRegistry) Call(ctx context.Context, name string, args []byte) ([]byte, error) {
	if !slices.Contains(t.allow, name) {
		return nil, canonical.Errorf(canonical.CodeNotFound, "tool %q is not in the allowlist", name)
	}
	if len(args) > maxToolBytes {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "tool %q: arguments exceed %d bytes", name, maxToolBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	ctx, span := tracing.Tracer().Start(ctx, "interlingua.tool", trace.WithAttributes(attribute.String("interlingua.tool", name)))
	defer span.End()
	out, err := t.call(ctx, name, args)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return out, err
}

func (t *ToolRegistry) call(ctx context.Context, name string, args []byte) ([]byte, error) {
	if f, ok := t.builtin[name]; ok {
		return f(ctx, args)
	}
	if t.nc == nil {
		return nil, canonical.Errorf(canonical.CodeUnavailable, "tool %q: no NATS connection", name)
	}
	req := nats.NewMsg(t.prefix + ".tool." + name)
	req.Data = args
	tracing.ToNATS(ctx, req)
	msg, err := t.nc.RequestMsgWithContext(ctx, req)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, canonical.Errorf(canonical.CodeUnavailable, "tool %q: no service answers on %s.tool.%s", name, t.prefix, name)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, canonical.Errorf(canonical.CodeDeadlineExceeded, "tool %q: no reply within %s", name, t.timeout)
	case err != nil:
		return nil, canonical.AsError(err)
	}
	// NATS micro services report errors in these headers.
	if e := msg.Header.Get("Nats-Service-Error"); e != "" {
		code := canonical.CodeUnknown
		if n, err := strconv.Atoi(msg.Header.Get("Nats-Service-Error-Code")); err == nil {
			code = httpishToCode(n)
		}
		return nil, canonical.WireError(code, "tool "+name+": "+e)
	}
	if len(msg.Data) > maxToolBytes {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted, "tool %q: result exceeds %d bytes", name, maxToolBytes)
	}
	return msg.Data, nil
}

// httpishToCode maps the HTTP-like codes NATS micro services use by
// convention onto canonical codes.
// warnUnserved warns, at start, of each tool the allowlist names that
// exists nowhere: not built in, and served by no NATS micro service
// answering $SRV.INFO within wait (with the embedded server alone none can
// be). A service that starts later still serves it: this is a warning of
// a likely typo, not a refusal.
func (t *ToolRegistry) warnUnserved(alone bool, wait time.Duration) {
	var missing []string
	for _, name := range t.allow {
		if _, ok := t.builtin[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return
	}
	served := map[string]bool{}
	if !alone && t.nc != nil {
		served = t.servedSubjects(wait)
	}
	for _, name := range missing {
		if !served[t.prefix+".tool."+name] {
			t.log.Warn("tools.allow names a tool that is not built in and no NATS service serves yet; calls fail until one does",
				"tool", name, "subject", t.prefix+".tool."+name, "built_in", strings.Join(slices.Sorted(maps.Keys(t.builtin)), ","))
		}
	}
}

// servedSubjects asks every NATS micro service for its endpoints
// ($SRV.INFO) and returns the subjects they serve, collected for wait.
func (t *ToolRegistry) servedSubjects(wait time.Duration) map[string]bool {
	served := map[string]bool{}
	inbox := t.nc.NewRespInbox()
	replies := make(chan *nats.Msg, 64)
	sub, err := t.nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return served
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := t.nc.PublishRequest("$SRV.INFO", inbox, nil); err != nil {
		return served
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case m := <-replies:
			var info micro.Info
			if json.Unmarshal(m.Data, &info) == nil {
				for _, ep := range info.Endpoints {
					served[ep.Subject] = true
				}
			}
		case <-timer.C:
			return served
		}
	}
}

func httpishToCode(n int) canonical.Code {
	switch {
	case n == 400:
		return canonical.CodeInvalidArgument
	case n == 401:
		return canonical.CodeUnauthenticated
	case n == 403:
		return canonical.CodePermissionDenied
	case n == 404:
		return canonical.CodeNotFound
	case n == 408 || n == 504:
		return canonical.CodeDeadlineExceeded
	case n == 429:
		return canonical.CodeResourceExhausted
	case n == 503:
		return canonical.CodeUnavailable
	case n >= 500:
		return canonical.CodeInternal
	}
	return canonical.CodeUnknown
}
