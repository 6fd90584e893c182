package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its
// key to the files, and returns a pool that trusts it.
func selfSigned(t *testing.T, certFile, keyFile, name string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key first, then the certificate: a reload between the two writes
	// finds a pair that does not match, and keeps the last good one.
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// With tls.cert_file and tls.key_file opsbot serves HTTPS, and a renewed
// certificate written over the files is served to the next connection,
// with no restart.
func TestTLSCertificateIsReloaded(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := selfSigned(t, certFile, keyFile, "first")
	path := writeConfig(t, dir, "tls:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n")
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--config", path}, testEnv(nil), strings.NewReader(""), pw, io.Discard)
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() { cancel(); <-done })
	sc := bufio.NewScanner(pr)
	var url string
	for url == "" && sc.Scan() {
		url, _ = strings.CutPrefix(sc.Text(), "opsbot serving on ")
	}
	go io.Copy(io.Discard, pr)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving on %q, want https://", url)
	}
	get := func(pool *x509.CertPool) (string, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url + "/healthz")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName, nil
	}
	if cn, err := get(first); err != nil || cn != "first" {
		t.Fatalf("first certificate: %q %v", cn, err)
	}
	// The container's health check finds the TLS server on the same port.
	if out, _, err := runCLI(t, map[string]string{"OPSBOT_LISTEN": strings.TrimPrefix(url, "https://")}, "healthcheck"); err != nil || out != "ok\n" {
		t.Fatalf("healthcheck of the TLS server: %v %q", err, out)
	}
	second := selfSigned(t, certFile, keyFile, "second")
	if cn, err := get(second); err != nil || cn != "second" {
		t.Fatalf("after the renewal: %q %v, want the second certificate", cn, err)
	}
}

// A renewal that writes the certificate before its key leaves a pair that
// does not load until the key comes: meanwhile every handshake gets the
// last good certificate, the broken pair is reported once (not once a
// handshake), and the key's arrival is picked up.
func TestHalfWrittenRenewalIsReportedOnce(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := selfSigned(t, certFile, keyFile, "first")
	path := writeConfig(t, dir, "tls:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n")
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var logs testkit.SyncBuffer
	go func() {
		err := run(ctx, []string{"serve", "--config", path}, testEnv(nil), strings.NewReader(""), pw, &logs)
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() { cancel(); <-done })
	sc := bufio.NewScanner(pr)
	var url string
	for url == "" && sc.Scan() {
		url, _ = strings.CutPrefix(sc.Text(), "opsbot serving on ")
	}
	go io.Copy(io.Discard, pr)
	addr := strings.TrimPrefix(url, "https://")
	handshake := func(pool *x509.CertPool) (string, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	if cn, err := handshake(first); err != nil || cn != "first" {
		t.Fatalf("first certificate: %q %v", cn, err)
	}

	// The renewal's certificate, written before its key.
	keyBefore, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	second := selfSigned(t, certFile, keyFile, "second")
	keyAfter, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyBefore, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if cn, err := handshake(first); err != nil || cn != "first" {
			t.Fatalf("handshake %d with the certificate written before its key: %q %v, want the last good one", i, cn, err)
		}
	}
	const line = "a changed TLS certificate does not load"
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Fatalf("100 handshakes against a half-written renewal logged %q %d times, want once\n%s", line, n, logs.String())
	}

	if err := os.WriteFile(keyFile, keyAfter, 0o600); err != nil {
		t.Fatal(err)
	}
	if cn, err := handshake(second); err != nil || cn != "second" {
		t.Fatalf("after the key is written: %q %v, want the renewed certificate", cn, err)
	}
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Fatalf("the fixed pair logged %q again (%d in all)", line, n)
	}
}
