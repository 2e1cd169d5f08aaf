//go:build unix

package bridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive lock on dir's lock file for as long as the
// file stays open: two instances on one data dir would share one embedded
// JetStream store, each overwriting the other's files. The lock goes with
// the process (kill -9 included), so a stale file never blocks a restart.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data_dir %s is in use by another interlingua (it holds %s); give each instance its own --data-dir", dir, path)
		}
		return nil, fmt.Errorf("data_dir: lock %s: %w", path, err)
	}
	return f, nil
}
