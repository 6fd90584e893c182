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
// error is reported through OnError once per change of the files: a pair
// that failed is not read again until a file changes (its stamps: inode,
// size and modification time) or RetryFailed passes, so handshakes against
// a half-written renewal cost a stat of each file, not a read and a parse
// each.
type CertFiles struct {
	CertFile, KeyFile string
	// OnError is told when a changed pair does not load (optional), once
	// for each change of the files.
	OnError func(err error)

	// read loads a pair (tls.LoadX509KeyPair; tests count the reads).
	read func(certFile, keyFile string) (tls.Certificate, error)
	// now is the clock of the retry of a pair that failed (time.Now).
	now func() time.Time

	mu     sync.Mutex
	cert   *tls.Certificate
	good   [2]fileStamp // the files as cert was read from them
	bad    [2]fileStamp // the files as they last failed to load
	badErr error        // why they failed; nil when the last read loaded
	badAt  time.Time    // when they were last read and failed
}

// RetryFailed is how long a pair that failed to load waits before it is
// read again though its files' stamps did not change (a fix copied in place
// with the same size and modification time, as cp -p or tar make it).
const RetryFailed = 30 * time.Second

// fileStamp is what tells that a file changed: its identity (inode and
// device), size and modification time, or that it could not be found.
type fileStamp struct {
	info    os.FileInfo
	missing string // the stat error, when the file could not be stat'ed
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{missing: err.Error()}, err
	}
	return fileStamp{info: fi}, nil
}

func (s fileStamp) same(o fileStamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == nil && o.info == nil && s.missing == o.missing && s.missing != ""
	}
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() && s.info.ModTime().Equal(o.info.ModTime())
}

func samePair(a, b [2]fileStamp) bool { return a[0].same(b[0]) && a[1].same(b[1]) }

// Load reads the pair now; an error says which file and why.
func (c *CertFiles) Load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.load()
	return err
}

// load reads the pair when the files changed since it was last read. It
// returns the error of a pair that does not load, and whether that error
// is news (the first for these stamps of the files): news is what is logged.
func (c *CertFiles) load() (news bool, err error) {
	var now [2]fileStamp
	var serr [2]error
	now[0], serr[0] = stamp(c.CertFile)
	now[1], serr[1] = stamp(c.KeyFile)
	if c.cert != nil && samePair(now, c.good) {
		return false, nil
	}
	clock := time.Now
	if c.now != nil {
		clock = c.now
	}
	retry := false
	if c.badErr != nil && samePair(now, c.bad) {
		if clock().Sub(c.badAt) < RetryFailed {
			return false, c.badErr // failed as the files are now: not read again yet
		}
		retry = true
	}
	switch {
	case serr[0] != nil:
		err = fmt.Errorf("tls.cert_file: %w", serr[0])
	case serr[1] != nil:
		err = fmt.Errorf("tls.key_file: %w", serr[1])
	default:
		read := c.read
		if read == nil {
			read = tls.LoadX509KeyPair
		}
		pair, rerr := read(c.CertFile, c.KeyFile)
		if rerr == nil {
			c.cert, c.good, c.badErr = &pair, now, nil
			return false, nil
		}
		err = fmt.Errorf("loading tls.cert_file %s and tls.key_file %s: %w", c.CertFile, c.KeyFile, rerr)
	}
	news = !retry || c.badErr == nil || err.Error() != c.badErr.Error()
	c.bad, c.badErr, c.badAt = now, err, clock()
	return news, err
}

// GetCertificate is tls.Config's hook: the pair as the files hold it now
// (checked once a handshake, by their stamps), or the last good pair while
// the files hold one that does not load.
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if news, err := c.load(); err != nil {
		if news && c.OnError != nil {
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
