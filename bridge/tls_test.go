package bridge_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn.
func writeCert(t *testing.T, dir, cn string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// The listener serves HTTPS with HTTP/2 by ALPN, and a reload swaps the
// certificate without a restart.
func TestTLSListenerAndReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool1 := writeCert(t, dir, "first")
	cfg := bridge.DefaultConfig()
	cfg.TLS = bridge.TLSConfig{CertFile: certFile, KeyFile: keyFile}
	inst := bridgetest.StartTLS(t, &cfg)
	get := func(pool *x509.CertPool) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		return (&http.Client{Transport: tr}).Get(inst.URL + "/healthz")
	}
	resp, err := get(pool1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS.PeerCertificates[0].Subject.CommonName != "first" {
		t.Fatalf("proto %s, cert %q", resp.Proto, resp.TLS.PeerCertificates[0].Subject.CommonName)
	}
	_, _, pool2 := writeCert(t, dir, "second") // overwrites the files
	if err := inst.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if _, err := get(pool1); err == nil {
		t.Fatal("the old certificate is still served after reload")
	}
	resp, err = get(pool2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Fatalf("cert after reload %q", cn)
	}
	// A broken file keeps the current certificate.
	_ = os.WriteFile(certFile, []byte("junk"), 0o600)
	if err := inst.ReloadTLS(); err == nil {
		t.Fatal("reload of a broken certificate succeeded")
	}
	if resp, err = get(pool2); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
	resp.Body.Close()
}
