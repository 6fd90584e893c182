// Package testkit is what tests across opsbot share: waiting for a
// condition, a buffer safe for concurrent writers, a local OIDC issuer and
// a JWT signer. It imports only the standard library, so any package's
// tests may use it, and it is linked into no binary.
package testkit

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Eventually polls cond until it holds. It waits for the condition, never
// for a fixed time: on a busy machine a test only takes longer. A condition
// that never holds fails the test shortly before the test binary's own
// deadline (go test -timeout; Deadline), saying what it waited for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := Deadline(t)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Deadline is when a test gives up waiting for something it expects: a
// margin before the test binary's deadline (go test -timeout), so the test
// fails saying what it waited for instead of the binary being killed. It is
// no budget of the test's own: whatever the machine's load, the wait lasts
// as long as the run allows. Without a deadline (-timeout 0) it is a day.
func Deadline(t testing.TB) time.Time {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok {
			margin := min(time.Until(end)/10, 30*time.Second)
			return end.Add(-margin)
		}
	}
	return time.Now().Add(24 * time.Hour)
}

// Expired is a channel that delivers once Deadline(t) has passed: the case
// of a select that waits for an event, failing only when the run would
// otherwise be killed.
func Expired(t testing.TB) <-chan time.Time {
	return time.After(time.Until(Deadline(t)))
}

// Arrives waits until arrived is closed or sends (a held request reached
// the fake), failing the test with what when it never does.
func Arrives(t testing.TB, arrived <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-arrived:
	case <-Expired(t):
		t.Fatalf("%s never reached GitHub", what)
	}
}

// SyncBuffer is a text buffer that goroutines may write at once (a
// server's log under test).
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// KeyID is the key id of an Issuer's key.
const KeyID = "k1"

// Issuer is a local OIDC issuer in GitHub Actions' shape: a discovery
// document and a JWKS served by httptest, an RSA key made for the test,
// and counts of the requests for each.
type Issuer struct {
	URL string
	Key *rsa.PrivateKey
	// Discoveries and KeyFetches count the requests.
	Discoveries, KeyFetches atomic.Int32
	// Down makes discovery answer 502.
	Down atomic.Bool
}

// NewIssuer starts an issuer, stopped when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{Key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.Discoveries.Add(1)
		if is.Down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"issuer": is.URL, "jwks_uri": is.URL + "/.well-known/jwks",
			"subject_types_supported": []string{"public", "pairwise"}, "response_types_supported": []string{"id_token"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "claims_supported": []string{"sub", "aud", "exp", "iat", "iss", "repository", "ref"}})
	})
	mux.HandleFunc("GET /.well-known/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.KeyFetches.Add(1)
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": KeyID,
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// Sign makes a token with claims signed by the issuer's key.
func (is *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return SignJWT(t, is.Key, KeyID, claims)
}

// SignJWT makes an RS256 JWT with claims, signed by key under kid.
func SignJWT(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	signing := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// WaitingTests is for a TestMain whose package's end-to-end tests wait on
// servers, fakes and clocks far more than they compute: unless -parallel
// is given, n of its parallel tests run at once, not GOMAXPROCS (go test's
// default, which leaves a machine of two cores idle most of the time). The
// tests that time something stay not parallel: they run alone, first.
func WaitingTests(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}
