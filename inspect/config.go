package inspect

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"time"
)

// Config is the inspector block of the daemon's config.
type Config struct {
	// Enabled serves /inspect and /v1/inspect/ and allows capture.
	// Default false.
	Enabled bool `yaml:"enabled"`
	// Targets are target names or globs whose every run is captured;
	// other runs are captured only when their request asks (the
	// X-Interlingua-Inspect header) or POST /v1/inspect/capture arms
	// their target. Default none.
	Targets []string `yaml:"targets"`
	// MaxBytes bounds each column of one capture (client wire, events,
	// upstream wire). Default 1 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// MaxDuration bounds the time after a run's start during which it is
	// recorded. Default 5m.
	MaxDuration time.Duration `yaml:"max_duration"`
	// MaxRuns bounds the captures kept; the oldest goes first. Default 100.
	MaxRuns int `yaml:"max_runs"`
	// MaxAge is how long a capture is kept. Default 1h.
	MaxAge time.Duration `yaml:"max_age"`
	// MaxArm bounds how long POST /v1/inspect/capture may arm a target.
	// Default 1h.
	MaxArm time.Duration `yaml:"max_arm"`
}

// withDefaults fills zero fields with their documented defaults.
func (c Config) withDefaults() Config {
	c.MaxBytes = cmp.Or(c.MaxBytes, 1<<20)
	c.MaxDuration = cmp.Or(c.MaxDuration, 5*time.Minute)
	c.MaxRuns = cmp.Or(c.MaxRuns, 100)
	c.MaxAge = cmp.Or(c.MaxAge, time.Hour)
	c.MaxArm = cmp.Or(c.MaxArm, time.Hour)
	return c
}

// Validate names every bad field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes < 0 || c.MaxRuns < 0 {
		errs = append(errs, errors.New("inspector.max_bytes, inspector.max_runs: must not be negative"))
	}
	if c.MaxDuration < 0 || c.MaxAge < 0 || c.MaxArm < 0 {
		errs = append(errs, errors.New("inspector.max_duration, inspector.max_age, inspector.max_arm: must not be negative"))
	}
	for i, t := range c.Targets {
		if _, err := path.Match(t, ""); err != nil || t == "" {
			errs = append(errs, fmt.Errorf("inspector.targets[%d]: bad target or glob %q", i, t))
		}
	}
	return errors.Join(errs...)
}
