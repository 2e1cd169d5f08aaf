package bridge

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// TLSConfig is the listener's certificate. With both files set the
// listener serves HTTPS (HTTP/1.1 and HTTP/2 by ALPN); SIGHUP reloads them.
type TLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// certReloader serves the current certificate and swaps it on Reload.
type certReloader struct {
	cfg  TLSConfig
	cert atomic.Pointer[tls.Certificate]
}

func newCertReloader(cfg TLSConfig) (*certReloader, error) {
	if cfg.CertFile == "" && cfg.KeyFile == "" {
		return nil, nil
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, fmt.Errorf("tls: give both cert_file and key_file")
	}
	r := &certReloader{cfg: cfg}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the certificate files again; on error the old one stays.
func (r *certReloader) Reload() error {
	c, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	r.cert.Store(&c)
	return nil
}

func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.cert.Load(), nil },
	}
}

// natsSecurity returns the NATS client options for TLS and credentials.
func natsSecurity(c NATSConfig) ([]nats.Option, error) {
	var opts []nats.Option
	if c.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLSCAFile))
	}
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile != "":
		opts = append(opts, nats.ClientCert(c.TLSCertFile, c.TLSKeyFile))
	case c.TLSCertFile != "" || c.TLSKeyFile != "":
		return nil, fmt.Errorf("nats: give both tls_cert_file and tls_key_file")
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCAFile != "" || c.TLSCertFile != "" {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}
