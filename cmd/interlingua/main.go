// Command interlingua is the Interlingua daemon and its tools.
//
//	interlingua serve [flags]        run the daemon
//	interlingua conformance [flags]  run the conformance suite
//	interlingua bench [flags]        load-test a frontend:backend pair
//	interlingua version              print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/internal/tracing"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `Interlingua translates between GenAI streaming protocols.

Usage:
  interlingua serve [flags]        run the daemon (interlingua serve --help)
  interlingua conformance [flags]  run the conformance suite (interlingua conformance --help)
  interlingua bench [flags]        load-test a frontend:backend pair (interlingua bench --help)
  interlingua version              print the version
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "conformance":
		return conformanceMain(args[1:], stdout, stderr)
	case "bench":
		return benchMain(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "interlingua", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "interlingua: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// versionString is the version and, from the build info, the VCS
// revision it was built from (with "+dirty" for uncommitted changes).
func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if v == "" && ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if !ok {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	short := rev[:min(len(rev), 12)]
	if rev == "" || strings.Contains(v, short) { // Go's pseudo-version names it already
		return v
	}
	return v + " (" + short + dirty + ")"
}

// unknownEnv returns the INTERLINGUA_* variables of environ that set
// nothing: a misspelt one would otherwise be ignored in silence.
func unknownEnv(environ []string) []string {
	known := map[string]bool{"INTERLINGUA_API_KEY": true, "INTERLINGUA_API_KEY_FILE": true}
	for _, k := range bridge.ScalarKeys() {
		known["INTERLINGUA_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "INTERLINGUA_") && !known[name] && !strings.HasPrefix(name, "INTERLINGUA_TEST_") {
			out = append(out, name)
		}
	}
	return out
}

// envAPIKeys turns auth on from the environment, for a container started
// without a config file: INTERLINGUA_API_KEY holds a key,
// INTERLINGUA_API_KEY_FILE names a file holding one (a mounted secret).
// A config that already reads the variable is left as it is.
func envAPIKeys(cfg *bridge.Config, lookup func(string) (string, bool)) {
	for _, src := range []struct{ env, name string }{{"INTERLINGUA_API_KEY", "env"}, {"INTERLINGUA_API_KEY_FILE", "file"}} {
		v, ok := lookup(src.env)
		if !ok || v == "" || slices.ContainsFunc(cfg.Auth.Keys, func(k bridge.APIKey) bool { return k.Env == src.env }) {
			continue
		}
		k := bridge.APIKey{Name: src.name, Env: src.env}
		if src.name == "file" {
			k = bridge.APIKey{Name: src.name, File: v}
		}
		cfg.Auth.Keys = append(cfg.Auth.Keys, k)
	}
}

// setFlags collects repeated --set key=value flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile = fs.String("config", "", "YAML config `file` (default: the embedded demo config)")
		listen     = fs.String("listen", "", "HTTP listen `address` (default 127.0.0.1:8080)")
		dataDir    = fs.String("data-dir", "", "data `folder` for the embedded NATS JetStream store (default $XDG_STATE_HOME/interlingua)")
		natsURL    = fs.String("nats-url", "", "external NATS `url`; empty starts an embedded nats-server")
		logLevel   = fs.String("log-level", "", "log `level`: debug, info, warn, error (default info)")
		logFormat  = fs.String("log-format", "", "log `format`: text or json (default text)")
		hostBEs    = fs.String("host-backends", "", "comma-separated `backends` this instance runs (default all; none for none); others are reached over NATS")
		shutdown   = fs.Duration("shutdown-timeout", 0, "how long runs may finish after SIGTERM before they are cancelled (default 30s)")
		sets       setFlags
		apiKeys    setFlags
	)
	fs.Var(&apiKeys, "api-key", "turn auth on with this API `key` (repeatable); clients send Authorization: Bearer <key>")
	fs.Var(&sets, "set", "override any scalar config `key=value` (repeatable), e.g. --set nats.replay_max_age=2h;\nkeys: "+strings.Join(bridge.ScalarKeys(), ", "))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: interlingua serve [flags]\n\nConfig precedence: file, then INTERLINGUA_* environment (e.g. INTERLINGUA_NATS_URL), then flags.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args, stderr); !ok {
		return status
	}
	cfg := bridge.DefaultConfig()
	if *configFile != "" {
		var err error
		if cfg, err = bridge.LoadConfig(*configFile); err != nil {
			fmt.Fprintln(stderr, "interlingua:", err)
			return 1
		}
	}
	if err := cfg.ApplyEnv(os.LookupEnv); err != nil {
		fmt.Fprintln(stderr, "interlingua:", err)
		return 1
	}
	envAPIKeys(&cfg, os.LookupEnv)
	for flagName, v := range map[string]string{"listen": *listen, "data_dir": *dataDir, "nats.url": *natsURL, "log.level": *logLevel, "log.format": *logFormat, "host_backends": *hostBEs} {
		if v != "" {
			_ = cfg.Set(flagName, v)
		}
	}
	if *shutdown != 0 {
		cfg.ShutdownTimeout = *shutdown
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(stderr, "interlingua: --set %q: want key=value\n", kv)
			return 2
		}
		if err := cfg.Set(k, v); err != nil {
			fmt.Fprintln(stderr, "interlingua:", err)
			return 2
		}
	}
	for i, k := range apiKeys {
		if strings.TrimSpace(k) == "" {
			fmt.Fprintln(stderr, "interlingua: --api-key: an empty key would let any client in")
			return 2
		}
		cfg.Auth.Keys = append(cfg.Auth.Keys, bridge.APIKey{Name: fmt.Sprintf("cli-%d", i+1), Hash: bridge.KeyDigest(k)})
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "interlingua:", err)
		return 1
	}
	return runServer(cfg, stderr)
}

// runServer runs the daemon with cfg until SIGTERM or SIGINT; SIGHUP
// reloads the TLS certificate.
func runServer(cfg bridge.Config, stderr io.Writer) int {
	log := bridge.NewLogger(cfg.Log, stderr)
	for _, name := range unknownEnv(os.Environ()) {
		log.Warn("environment variable ignored: no config key has that name", "name", name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stopTracing, err := tracing.Start(ctx, cfg.Tracing)
	if err != nil {
		fmt.Fprintln(stderr, "interlingua: tracing:", err)
		return 1
	}
	defer stopTracing(context.Background())
	srv, err := bridge.NewServer(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "interlingua:", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() { signal.Stop(hup); close(hup) }()
	go func() {
		for range hup {
			if err := srv.ReloadTLS(); err != nil {
				log.Error("tls reload failed; keeping the old certificate", "err", err)
			}
		}
	}()
	if err := srv.Serve(ctx); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}

// parseFlags parses a command's args; ok false, with the exit status, when
// the command stops there: help asked (0), a bad flag or an argument (2).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (status int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "interlingua %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}
