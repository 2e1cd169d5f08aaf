package wsconn

import (
	"errors"
	"log/slog"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Config holds a Conn's limits. A zero field means its documented default;
// no setting disables a limit. Negative fields are rejected by Validate (New
// treats them as zero).
type Config struct {
	// MaxMessageBytes is the largest message Read accepts, checked from the
	// frame headers before the payload is read; a larger one closes the
	// connection with 1009. Default 4 MiB.
	MaxMessageBytes int64
	// SendQueue is how many frames Send may queue ahead of the writer; a
	// Send that finds it full cuts the peer off as a slow consumer.
	// Default 256.
	SendQueue int
	// WriteTimeout bounds each frame write; a write blocked longer cuts the
	// peer off as a slow consumer. Default 10s.
	WriteTimeout time.Duration
	// PingInterval is how often the writer pings. Read's deadline is twice
	// the interval past its start or the last pong received, whichever is
	// later. Default 30s.
	PingInterval time.Duration
	// CloseGrace bounds the flush of queued frames and the close frame when
	// the Conn ends, and how long Close waits for them before it closes
	// the network connection regardless. Default 1s.
	CloseGrace time.Duration
	// Logger receives debug records of failed close handshakes. Default
	// discards.
	Logger *slog.Logger
	// SlowConsumers counts the peers cut off as slow consumers, once each,
	// in the metrics of the server that owns the connection (a
	// prometheus.Counter). Nil: not counted.
	SlowConsumers Counter
}

// Counter is what a Conn counts its slow-consumer cut-off in; an
// interface, not a func, so that Config stays comparable.
type Counter interface{ Inc() }

// Defaults for the zero Config fields.
const (
	defaultMaxMessageBytes = 4 << 20
	defaultSendQueue       = 256
	defaultWriteTimeout    = 10 * time.Second
	defaultPingInterval    = 30 * time.Second
	defaultCloseGrace      = time.Second
)

// Validate reports every negative field, each named.
func (c Config) Validate() error {
	var errs []error
	check := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, canonical.Errorf(canonical.CodeInvalidArgument,
				"wsconn: Config.%s is negative (%d); zero means the default", name, v))
		}
	}
	check("MaxMessageBytes", c.MaxMessageBytes)
	check("SendQueue", int64(c.SendQueue))
	check("WriteTimeout", int64(c.WriteTimeout))
	check("PingInterval", int64(c.PingInterval))
	check("CloseGrace", int64(c.CloseGrace))
	return errors.Join(errs...)
}

// withDefaults returns c with each zero or negative field set to its default.
func (c Config) withDefaults() Config {
	c.MaxMessageBytes = orDefault(c.MaxMessageBytes, defaultMaxMessageBytes)
	c.SendQueue = orDefault(c.SendQueue, defaultSendQueue)
	c.WriteTimeout = orDefault(c.WriteTimeout, defaultWriteTimeout)
	c.PingInterval = orDefault(c.PingInterval, defaultPingInterval)
	c.CloseGrace = orDefault(c.CloseGrace, defaultCloseGrace)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// orDefault is cmp.Or that also replaces negative values.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
