package server

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// CertFiles serves a certificate and key from files, loading them again
// when either file changes (a renewal by certbot or cert-manager), so the
// server never needs a restart for a new certificate. A pair that does not
// load is an error at start; later, the last good pair stays in use and the
// error is reported through OnError.
type CertFiles struct {
	CertFile, KeyFile string
	// OnError is told when a changed pair does not load (optional).
	OnError func(err error)

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	certSize int64
	keySize  int64
}

// Load reads the pair now; an error says which file and why.
func (c *CertFiles) Load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.load()
}

func (c *CertFiles) load() error {
	ci, err := os.Stat(c.CertFile)
	if err != nil {
		return fmt.Errorf("tls.cert_file: %w", err)
	}
	ki, err := os.Stat(c.KeyFile)
	if err != nil {
		return fmt.Errorf("tls.key_file: %w", err)
	}
	if c.cert != nil && ci.ModTime().Equal(c.certMod) && ki.ModTime().Equal(c.keyMod) && ci.Size() == c.certSize && ki.Size() == c.keySize {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return fmt.Errorf("loading tls.cert_file %s and tls.key_file %s: %w", c.CertFile, c.KeyFile, err)
	}
	c.cert, c.certMod, c.keyMod, c.certSize, c.keySize = &pair, ci.ModTime(), ki.ModTime(), ci.Size(), ki.Size()
	return nil
}

// GetCertificate is tls.Config's hook: the pair as the files hold it now
// (checked once a handshake, by their times and sizes).
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(); err != nil {
		if c.OnError != nil {
			c.OnError(err)
		}
		if c.cert == nil {
			return nil, err
		}
	}
	return c.cert, nil
}

// TLSConfig is the server's TLS configuration with this pair.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate}
}
