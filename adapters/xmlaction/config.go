package xmlaction

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Config configures the decoder, the executor (Wrap) and the frontend. Every
// zero field means its documented default; there is no unlimited setting.
type Config struct {
	// Tools runs tool and relic actions (and agent, llm and workflow actions
	// whose name no route serves). Nil: such actions fail with
	// FAILED_PRECONDITION.
	Tools canonical.Tools
	// Runner runs agent, llm and workflow actions as nested runs, and is
	// what the frontend starts runs on.
	Runner canonical.Runner
	// Logger receives the executor's and frontend's logs; payloads never
	// reach it. Default: discard.
	Logger *slog.Logger
	// Clock times action timeouts and retry backoff. Default: the wall clock.
	Clock Clock

	// MaxActionBytes bounds one action's JSON body. Default 1 MiB.
	MaxActionBytes int
	// MaxTagBytes bounds an opening <action> or <response> tag with its
	// attributes; a longer one is literal text. Default 4096.
	MaxTagBytes int
	// MaxActions bounds the actions of one run; later ones fail with
	// RESOURCE_EXHAUSTED. Default 256.
	MaxActions int
	// MaxHeldBytes bounds the decoded output held back while it waits for a
	// sync action or a $reference; a run that needs more fails with
	// RESOURCE_EXHAUSTED. Default 4 MiB.
	MaxHeldBytes int
	// MaxOutputBytes bounds the text a nested run may return as an action's
	// result. Default 1 MiB.
	MaxOutputBytes int
	// ActionTimeout bounds one attempt of an action that sets no timeout,
	// and is the most an action's own timeout may ask for. Default 5m.
	ActionTimeout time.Duration
	// MaxRetries bounds an action's retry count (retries beyond it are not
	// made). Default 5.
	MaxRetries int
	// RetryBackoff is the wait before the first retry; it doubles for each
	// later one, up to 32 times its value. Default 250ms.
	RetryBackoff time.Duration
	// MaxDepth bounds nested runs started by actions inside nested runs.
	// Default 4.
	MaxDepth int
	// MaxBackground bounds the fire_and_forget actions in flight per
	// wrapped backend; more fail with RESOURCE_EXHAUSTED. Default 64.
	MaxBackground int
	// MaxRequestBytes bounds a frontend request body. Default 4 MiB.
	MaxRequestBytes int64
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	c.MaxActionBytes = cmp.Or(c.MaxActionBytes, 1<<20)
	c.MaxTagBytes = cmp.Or(c.MaxTagBytes, 4096)
	c.MaxActions = cmp.Or(c.MaxActions, 256)
	c.MaxHeldBytes = cmp.Or(c.MaxHeldBytes, 4<<20)
	c.MaxOutputBytes = cmp.Or(c.MaxOutputBytes, 1<<20)
	c.ActionTimeout = cmp.Or(c.ActionTimeout, 5*time.Minute)
	c.MaxRetries = cmp.Or(c.MaxRetries, 5)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, 250*time.Millisecond)
	c.MaxDepth = cmp.Or(c.MaxDepth, 4)
	c.MaxBackground = cmp.Or(c.MaxBackground, 64)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, 4<<20)
	return c
}

// Clock is the executor's time source. Tests inject a fake one, so
// timeouts and backoff need no sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless
	// the returned stop function is called first (it reports whether it
	// stopped the call), as time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
