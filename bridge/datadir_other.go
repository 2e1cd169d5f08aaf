//go:build !unix

package bridge

import "os"

// lockDataDir is a no-op where flock does not exist: run one instance per
// data dir there.
func lockDataDir(string) (*os.File, error) { return nil, nil }
