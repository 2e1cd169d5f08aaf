package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/inspect"
	"github.com/interlingua-dev/interlingua/internal/tracing"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// Config is the daemon's configuration: a YAML file, then INTERLINGUA_*
// environment variables, then flags, each overriding the one before. Every
// zero value means the documented default, filled in by Defaults.
type Config struct {
	// Listen is the one HTTP listener (HTTP/1.1 and h2c). Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// DataDir holds the embedded NATS server's JetStream store. Default
	// $XDG_STATE_HOME/interlingua (~/.local/state/interlingua).
	DataDir string `yaml:"data_dir"`
	// ShutdownTimeout is how long running runs may finish after SIGTERM
	// before they are cancelled. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// BodyTimeout bounds the time to receive a request's body, on every
	// path whose input is not a stream (WebSockets and gRPC/Connect
	// streams have idle timeouts instead): a body that stops arriving
	// would hold its goroutine and connection for ever. Default 30s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// WriteTimeout bounds each write of a response to the client's socket
	// on every HTTP path: a client that stops reading a stream is cut off
	// and its run cancelled. Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// AllowedOrigins are the web origins ("https://app.example.com") whose
	// pages may call the daemon from a browser; a request with any other
	// Origin (but the daemon's own) is refused. They get CORS headers.
	AllowedOrigins []string   `yaml:"allowed_origins"`
	Log            LogConfig  `yaml:"log"`
	NATS           NATSConfig `yaml:"nats"`
	// Backends are the upstreams, by name.
	Backends map[string]BackendConfig `yaml:"backends"`
	// Frontends holds each frontend's own options, by frontend name
	// (evergreen: default_target, fetch_refs, limits, ...).
	Frontends map[string]yaml.Node `yaml:"frontends"`
	// Routes map target names (exact or glob) to backends, first match wins.
	Routes  []Route        `yaml:"routes"`
	Tools   ToolsConfig    `yaml:"tools"`
	TLS     TLSConfig      `yaml:"tls"`
	Auth    AuthConfig     `yaml:"auth"`
	Tracing tracing.Config `yaml:"tracing"`
	// Inspector is the page at /inspect that shows captured runs wire to
	// canonical to wire (docs/inspector.md). Default off.
	Inspector inspect.Config `yaml:"inspector"`
	// HostBackends names the backends this instance runs; the others are
	// reached through instances that host them, over NATS. Default: all
	// configured backends; "none" hosts none.
	HostBackends []string `yaml:"host_backends"`
}

// LogConfig configures the structured log.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// Values of NATSConfig.PersistMode.
const (
	PersistAsync = "async"
	PersistSync  = "sync"
)

// NATSConfig configures the fabric.
type NATSConfig struct {
	// URL of an external NATS cluster; empty starts an embedded server.
	URL string `yaml:"url"`
	// SubjectPrefix prefixes every subject. Default "interlingua".
	SubjectPrefix string `yaml:"subject_prefix"`
	// EmbeddedListen makes the embedded server accept NATS clients on this
	// address (e.g. 127.0.0.1:4222, port 0 for any); empty keeps it
	// in-process only.
	EmbeddedListen string `yaml:"embedded_listen"`
	// ReplayMaxAge bounds the JetStream replay log by age. Default 1h.
	ReplayMaxAge time.Duration `yaml:"replay_max_age"`
	// ReplayMaxBytes bounds the replay log by size. Default 1 GiB.
	ReplayMaxBytes int64 `yaml:"replay_max_bytes"`
	// PersistMode is how the JetStream replay stream is written: async
	// (the server collects events in memory and writes them to its files
	// in batches, in the background: a crash of the NATS server can lose
	// the events of the last moment from the log, never from a client,
	// which gets them in-process) or sync (each event is written to the
	// file before the next is stored, JetStream's default; one write per
	// event). Default async. It applies when the stream is created:
	// JetStream cannot change the mode of an existing stream (the mode it
	// has is kept and logged; delete INTERLINGUA_EVENTS to switch), and a
	// NATS server before 2.12 has no async mode (the stream is written
	// sync, logged at start).
	PersistMode string `yaml:"persist_mode"`
	// Replicas is how many NATS servers keep each JetStream asset (the
	// replay stream, the thread bucket): with 3, a cluster loses nothing
	// when one server dies. 1 to 5, default 1; more than 1 needs an
	// external cluster (url) of at least that many JetStream servers. A
	// replicated replay stream is written sync (JetStream has no async
	// mode for it; its replicas are what keep an event).
	Replicas int `yaml:"replicas"`
	// ThreadTTL is how long a thread's stored state (the thread store's
	// records: agent thread state and checkpoints) lives after its last
	// write. Default 7 days (168h).
	ThreadTTL time.Duration `yaml:"thread_ttl"`
	// ThreadMaxBytes bounds the thread store: its KV bucket and its chunk
	// stream (values over 256 KiB) each hold at most this many bytes. A
	// write past it fails with resource_exhausted; nothing stored is
	// dropped to make room. Default 1 GiB.
	ThreadMaxBytes int64 `yaml:"thread_max_bytes"`
	// ConnectTimeout bounds the first connection. Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// PublishQueue bounds the events queued for publishing. Default 65536.
	PublishQueue int `yaml:"publish_queue"`
	// PublishDelay is the longest the events of a run whose client is on
	// this instance (NATS carries them to observers and the replay log
	// only) wait to be published together with the next ones, in one
	// message. Default 1ms; negative publishes each burst at once. Events
	// of a run owned for another instance or executed by a runtime (the
	// agent protocol's, whose clients read the log) never wait, nor do
	// those queued when a run ends.
	PublishDelay time.Duration `yaml:"publish_delay"`
	// ReconnectBufferBytes bounds what is buffered while NATS reconnects.
	// Default 8 MiB.
	ReconnectBufferBytes int `yaml:"reconnect_buffer_bytes"`
	// Heartbeat is how often a run's owner says it is alive. Default 1s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// OwnerTimeout: a run whose owner sends neither event nor heartbeat for
	// this long fails with unavailable. Default 3x Heartbeat.
	OwnerTimeout time.Duration `yaml:"owner_timeout"`
	// StartTimeout bounds placing a run on another instance. Default 5s.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// RemoteBuffer bounds the events buffered for one remote run before
	// it is cut off as a slow consumer. Default 65536. (Observers are not
	// cut off: one behind its thread's tail reads the replay log.)
	RemoteBuffer int `yaml:"remote_buffer"`
	// TLSCAFile, TLSCertFile and TLSKeyFile secure the connection to an
	// external NATS; CredsFile holds its user credentials (JWT + nkey).
	TLSCAFile   string `yaml:"tls_ca_file"`
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	CredsFile   string `yaml:"creds_file"`
	// Token authenticates NATS clients: every instance connects with it,
	// and the embedded server, when it listens (EmbeddedListen), accepts
	// only clients that present it. Required for an embedded listener that
	// is not loopback: anyone reaching the port would read every run's
	// prompt and output and could place runs, past the API keys.
	Token string `yaml:"token"`
}

// BackendConfig is one upstream. Type names the adapter; Options are the
// adapter's own settings, checked by the adapter.
type BackendConfig struct {
	Type string `yaml:"type"`
	// StallTimeout fails a run whose backend sends no event for this long
	// (deadline_exceeded), closing its upstream request: an upstream that
	// stops sending, its connection open, would hold the run to its whole
	// timeout, or for ever. What a runtime or an XML route's actions wait
	// for is not counted. Default 5m; negative turns it off.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	Options      yaml.Node     `yaml:"options"`
}

// Route maps a target (exact name or path.Match glob) to a backend.
type Route struct {
	Target  string `yaml:"target"`
	Backend string `yaml:"backend"`
	// Model renames the target for the backend; empty passes it unchanged.
	Model string `yaml:"model"`
	// XML turns the XML action-stream decoder on for this route.
	XML bool `yaml:"xml"`
	// Parameters are defaults for requests on this route: each applies
	// when the request does not set it (e.g. temperature, max_tokens).
	Parameters map[string]any `yaml:"parameters"`
}

// ToolsConfig is the tool allowlist: only tools named here ever run.
type ToolsConfig struct {
	// Allow names the tools that may run: built-in ones (calculator, clock,
	// echo) or NATS micro services on <prefix>.tool.<name>. Default: the
	// built-in ones.
	Allow []string `yaml:"allow"`
	// Timeout bounds one tool call. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultConfig is the embedded default: the scripted backend serving its
// demo targets.
func DefaultConfig() Config {
	c := Config{
		Backends: map[string]BackendConfig{"scripted": {Type: "scripted"}},
	}
	for _, t := range []string{"echo", "demo-agent", "demo-approval", "stream"} {
		c.Routes = append(c.Routes, Route{Target: t, Backend: "scripted"})
	}
	// The Cortex example: XML text from the model, decoded and executed.
	c.Routes = append(c.Routes, Route{Target: "cortex-example", Backend: "scripted", XML: true})
	return c
}

// Defaults fills every zero field with its documented default.
func (c *Config) Defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = defaultDataDir()
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	n := &c.NATS
	if n.SubjectPrefix == "" {
		n.SubjectPrefix = "interlingua"
	}
	if n.ReplayMaxAge == 0 {
		n.ReplayMaxAge = time.Hour
	}
	if n.ReplayMaxBytes == 0 {
		n.ReplayMaxBytes = 1 << 30
	}
	if n.PersistMode == "" {
		n.PersistMode = PersistAsync
	}
	if n.Replicas == 0 {
		n.Replicas = 1
	}
	if n.ThreadTTL == 0 {
		n.ThreadTTL = 7 * 24 * time.Hour
	}
	if n.ThreadMaxBytes == 0 {
		n.ThreadMaxBytes = 1 << 30
	}
	if n.ConnectTimeout == 0 {
		n.ConnectTimeout = 5 * time.Second
	}
	if n.PublishQueue == 0 {
		n.PublishQueue = 65536
	}
	if n.PublishDelay == 0 {
		n.PublishDelay = time.Millisecond
	}
	if n.ReconnectBufferBytes == 0 {
		n.ReconnectBufferBytes = 8 << 20
	}
	if n.Heartbeat == 0 {
		n.Heartbeat = time.Second
	}
	if n.OwnerTimeout == 0 {
		n.OwnerTimeout = 3 * n.Heartbeat
	}
	if n.StartTimeout == 0 {
		n.StartTimeout = 5 * time.Second
	}
	if n.RemoteBuffer == 0 {
		n.RemoteBuffer = 65536
	}
	if c.Tools.Allow == nil {
		c.Tools.Allow = []string{"calculator", "clock", "echo"}
	}
	if c.Tools.Timeout == 0 {
		c.Tools.Timeout = 30 * time.Second
	}
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "interlingua")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "interlingua")
	}
	return filepath.Join(os.TempDir(), "interlingua")
}

// LoadConfig reads a YAML config file. Unknown keys and ill-typed values are
// refused with the key and line; so is a route naming an unknown backend.
func LoadConfig(file string) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(file, data)
}

// ParseConfig parses YAML config data; name prefixes error messages.
func ParseConfig(name string, data []byte) (Config, error) {
	var c Config
	var doc yaml.Node // read once: checked, then for validateRoutes' lines
	if err := yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) > 0 {
		if errs := protocol.CheckNode(doc.Content[0], reflect.TypeOf(c), ""); len(errs) > 0 {
			return Config{}, fmt.Errorf("config %s: %w", name, errors.Join(errs...))
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config %s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := c.validateRoutes(name, &doc); err != nil {
		return Config{}, err
	}
	return c, nil
}

// validateRoutes checks that every route names a configured backend.
func (c *Config) validateRoutes(name string, root *yaml.Node) error {
	var errs []error
	for i, r := range c.Routes {
		if r.Target == "" {
			errs = append(errs, fmt.Errorf("config %s: line %d: routes[%d].target is empty", name, routeLine(root, i, "target"), i))
		} else if _, err := path.Match(r.Target, ""); err != nil {
			errs = append(errs, fmt.Errorf("config %s: line %d: routes[%d].target: bad glob %q", name, routeLine(root, i, "target"), i, r.Target))
		}
		if _, ok := c.Backends[r.Backend]; !ok {
			errs = append(errs, fmt.Errorf("config %s: line %d: routes[%d].backend: unknown backend %q", name, routeLine(root, i, "backend"), i, r.Backend))
		}
	}
	for fn, block := range c.Frontends {
		if !knownFrontend(fn) {
			errs = append(errs, fmt.Errorf("config %s: frontends.%s: unknown frontend (known: %s)", name, fn, strings.Join(FrontendNames(), ", ")))
			continue
		}
		for _, err := range checkFrontendOptions(fn, &block) {
			errs = append(errs, fmt.Errorf("config %s: %w", name, err))
		}
	}
	for bn, b := range c.Backends {
		if b.Type == "" {
			errs = append(errs, fmt.Errorf("config %s: backends.%s.type is empty", name, bn))
		}
	}
	return errors.Join(errs...)
}

// checkFrontendOptions checks a frontends.<name> block against the type
// the frontend decodes it into; a frontend that takes none refuses any.
func checkFrontendOptions(name string, block *yaml.Node) []error {
	if block.Kind == 0 || block.Tag == "!!null" {
		return nil
	}
	newOptions := protocols.Get(name).FrontendOptions
	if newOptions == nil {
		if block.Kind == yaml.MappingNode && len(block.Content) == 0 {
			return nil
		}
		return []error{fmt.Errorf("line %d: frontends.%s: the %s frontend takes no options", block.Line, name, name)}
	}
	return protocol.CheckNode(block, reflect.TypeOf(newOptions()), "frontends."+name)
}

// routeLine finds the line of routes[i].key in the YAML tree (0 if absent).
func routeLine(root *yaml.Node, i int, key string) int {
	if root == nil || len(root.Content) == 0 {
		return 0
	}
	doc := root.Content[0]
	for j := 0; j+1 < len(doc.Content); j += 2 {
		if doc.Content[j].Value != "routes" {
			continue
		}
		seq := doc.Content[j+1]
		if i >= len(seq.Content) {
			return seq.Line
		}
		item := seq.Content[i]
		for k := 0; k+1 < len(item.Content); k += 2 {
			if item.Content[k].Value == key {
				return item.Content[k+1].Line
			}
		}
		return item.Line
	}
	return 0
}

// Validate checks the filled-in config.
func (c *Config) Validate() error {
	var errs []error
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level: %q is not debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format: %q is not text or json", c.Log.Format))
	}
	if len(c.Routes) == 0 {
		// A gateway with no route answers every request "unknown target":
		// a config that forgot them is refused rather than served.
		errs = append(errs, fmt.Errorf("routes: none configured; every request would fail with unknown target (add routes: [{target: ..., backend: ...}])"))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %q is not host:port (e.g. localhost:8080, :8080)", c.Listen))
	}
	if c.ShutdownTimeout < 0 || c.BodyTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown_timeout, body_timeout, write_timeout: must not be negative"))
	}
	for _, h := range c.HostBackends {
		if _, ok := c.Backends[h]; !ok && h != "none" {
			errs = append(errs, fmt.Errorf("host_backends: unknown backend %q", h))
		}
	}
	if c.NATS.PublishQueue < 0 || c.NATS.RemoteBuffer < 0 || c.NATS.ReconnectBufferBytes < 0 {
		errs = append(errs, fmt.Errorf("nats: queue and buffer sizes must be positive"))
	}
	if l := c.NATS.EmbeddedListen; l != "" && c.NATS.URL == "" && !isLoopback(l) && c.NATS.Token == "" {
		errs = append(errs, fmt.Errorf("nats.embedded_listen %s is not loopback: set nats.token, which the cluster's instances connect with", l))
	}
	if c.NATS.ThreadTTL < 0 || c.NATS.ThreadMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("nats.thread_ttl, nats.thread_max_bytes: must not be negative"))
	}
	switch c.NATS.PersistMode {
	case "", PersistAsync, PersistSync:
	default:
		errs = append(errs, fmt.Errorf("nats.persist_mode: %q is not async or sync", c.NATS.PersistMode))
	}
	switch r := c.NATS.Replicas; {
	case r < 0 || r > 5: // 0 is the default, before Defaults
		errs = append(errs, fmt.Errorf("nats.replicas: %d is not 1 to 5", r))
	case r > 1 && c.NATS.URL == "":
		errs = append(errs, fmt.Errorf("nats.replicas: %d needs a NATS cluster (nats.url); the embedded server is one server", r))
	}
	if err := c.Inspector.Validate(); err != nil {
		errs = append(errs, err)
	}
	if strings.ContainsAny(c.NATS.SubjectPrefix, " .*>") {
		errs = append(errs, fmt.Errorf("nats.subject_prefix: %q must be one subject token", c.NATS.SubjectPrefix))
	}
	return errors.Join(errs...)
}

// ApplyEnv overrides scalar keys from INTERLINGUA_* variables: the key path
// in upper case joined by "_" (nats.url -> INTERLINGUA_NATS_URL). Lists are
// comma-separated.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	var errs []error
	walkScalars(reflect.ValueOf(c).Elem(), "", func(key string, v reflect.Value) {
		env := "INTERLINGUA_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if s, ok := lookup(env); ok {
			if err := setScalar(v, s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

// Set overrides one scalar key ("nats.url") with a string value, as the
// --set flag does.
func (c *Config) Set(key, value string) error {
	found := false
	var err error
	walkScalars(reflect.ValueOf(c).Elem(), "", func(k string, v reflect.Value) {
		if k == key {
			found = true
			err = setScalar(v, value)
		}
	})
	if !found {
		return fmt.Errorf("--set %s: unknown key (keys: %s)", key, strings.Join(ScalarKeys(), ", "))
	}
	if err != nil {
		return fmt.Errorf("--set %s: %w", key, err)
	}
	return nil
}

// ScalarKeys lists the keys ApplyEnv and Set accept.
func ScalarKeys() []string {
	var keys []string
	var c Config
	walkScalars(reflect.ValueOf(&c).Elem(), "", func(k string, _ reflect.Value) { keys = append(keys, k) })
	return keys
}

var durationType = reflect.TypeOf(time.Duration(0))

func walkScalars(v reflect.Value, prefix string, fn func(string, reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		fv := v.Field(i)
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(yaml.Node{}):
			walkScalars(fv, key, fn)
		case f.Type.Kind() == reflect.String, f.Type.Kind() == reflect.Bool,
			f.Type.Kind() == reflect.Int, f.Type.Kind() == reflect.Int64, f.Type.Kind() == reflect.Float64,
			f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			fn(key, fv)
		}
	}
}

func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int, v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	}
	return nil
}
