// Package auth holds opsbot's trust decisions: webhook signatures, repository
// roles and the policy that says who may run which command. It is pure policy
// plus one-method lookups; it does no I/O of its own.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
)

// Secret is a credential. It never prints: logs show REDACTED.
type Secret string

// LogValue keeps secrets out of structured logs.
func (Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String keeps secrets out of fmt output.
func (Secret) String() string { return "REDACTED" }

// Reveal returns the secret's value, for the one place that must use it.
func (s Secret) Reveal() string { return string(s) }

// Signature errors. Both mean the request is not from GitHub.
var (
	ErrNoSignature  = errors.New("auth: missing X-Hub-Signature-256 header")
	ErrBadSignature = errors.New("auth: signature does not match any configured secret")
	ErrNoSecrets    = errors.New("auth: no webhook secret configured")
)

// VerifySignature checks header (the X-Hub-Signature-256 value,
// "sha256=<hex>") against the HMAC-SHA256 of body under each secret, in
// constant time. It never accepts an unsigned body, an empty secret or SHA-1.
func VerifySignature(body []byte, header string, secrets []Secret) error {
	return VerifySignatureParts([][]byte{body}, header, secrets)
}

// VerifySignatureParts is VerifySignature over the concatenation of parts,
// for a body read in pieces that must not be joined before it is trusted.
func VerifySignatureParts(parts [][]byte, header string, secrets []Secret) error {
	if len(secrets) == 0 {
		return ErrNoSecrets
	}
	if header == "" {
		return ErrNoSignature
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return ErrBadSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return ErrBadSignature
	}
	match := 0
	for _, s := range secrets {
		if s == "" {
			continue
		}
		m := hmac.New(sha256.New, []byte(s))
		for _, p := range parts {
			m.Write(p)
		}
		match |= boolInt(hmac.Equal(m.Sum(nil), got))
	}
	if match == 0 {
		return ErrBadSignature
	}
	return nil
}

// Sign returns the X-Hub-Signature-256 header value GitHub would send for body.
func Sign(body []byte, secret Secret) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TokenMatches reports whether token is one of tokens, in time that depends
// on neither the tokens' contents nor their lengths: it compares SHA-256
// sums, all of one size, with every candidate. An empty token never
// matches.
func TokenMatches(token string, tokens []Secret) bool {
	if token == "" {
		return false
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, t := range tokens {
		if t == "" {
			continue
		}
		want := sha256.Sum256([]byte(t))
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SignatureSum identifies a signed delivery by what it says: a sum of
// its event and its X-Hub-Signature-256, which, once verified, is GitHub's
// keyed sum of the body (HMAC-SHA256), so no second pass over the body is
// needed. A delivery resent under a new id, the same bytes with the same
// signature, has the same sum. ok is false for a header that is no
// signature.
func SignatureSum(event, header string) (sum [sha256.Size]byte, ok bool) {
	hexSig, found := strings.CutPrefix(header, "sha256=")
	sig, err := hex.DecodeString(hexSig)
	if !found || err != nil || len(sig) != sha256.Size {
		return sum, false
	}
	h := sha256.New()
	h.Write([]byte("signed\x00" + event + "\x00"))
	h.Write(sig)
	return [sha256.Size]byte(h.Sum(nil)), true
}
