package bridgetest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NATSServerBin is the nats-server to run: one on PATH, else the one the
// Makefile builds into the module's bin/; the test is skipped without.
func NATSServerBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	dir, _ := os.Getwd()
	for dir != filepath.Dir(dir) { // up to the module's root
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	p := filepath.Join(dir, "bin", "nats-server")
	if _, err := os.Stat(p); err != nil {
		t.Skip("nats-server not built: run make test (it builds bin/nats-server from its Go module)")
	}
	return p
}

// NATSProcess is a JetStream nats-server process on loopback whose store
// folder outlives Kill, so that Start brings the same server back: what a
// test needs to lose NATS as a machine loses it (kill -9) and recover.
type NATSProcess struct {
	Addr  string // host:port
	bin   string
	store string
	cmd   *exec.Cmd
}

// StartNATSProcess starts a nats-server on a free loopback port; the
// test's cleanup kills it.
func StartNATSProcess(t testing.TB) *NATSProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n := &NATSProcess{Addr: addr, bin: NATSServerBin(t), store: t.TempDir()}
	n.Start(t)
	t.Cleanup(n.Kill)
	return n
}

// URL is the server's client URL.
func (n *NATSProcess) URL() string { return "nats://" + n.Addr }

// Start starts the server (again) and waits until it listens.
func (n *NATSProcess) Start(t testing.TB) {
	t.Helper()
	host, port, _ := strings.Cut(n.Addr, ":")
	n.cmd = exec.Command(n.bin, "-a", host, "-p", port, "-js", "-sd", n.store)
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
			c.Close()
			return
		}
	}
	t.Fatal("nats-server did not listen")
}

// Kill kills the server with SIGKILL and waits for it to exit.
func (n *NATSProcess) Kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}
