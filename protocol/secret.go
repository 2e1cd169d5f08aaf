package protocol

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// SecretRef is a backend option naming where a secret (an upstream's API
// key) is, never the secret itself: give at most one of Env and File. The
// same block for every backend that needs one (api_key: {env: …}).
type SecretRef struct {
	Env  string `yaml:"env"`
	File string `yaml:"file"`
}

// Read returns the secret ("" when neither is given); option names the
// block in errors.
func (s SecretRef) Read(option string) (string, error) {
	switch {
	case s.Env != "" && s.File != "":
		return "", errors.New(option + ": give env or file, not both")
	case s.Env != "":
		k := os.Getenv(s.Env)
		if k == "" {
			return "", fmt.Errorf("%s: environment variable %s is empty or unset", option, s.Env)
		}
		return k, nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("%s: %w", option, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}
