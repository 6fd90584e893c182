// Package idtoken lets a GitHub Actions job ask the sweep gate with its OIDC
// ID token instead of a static secret. A token is verified against the
// configured issuer and audience, and then covers only the asks its claims
// match: the repository it was minted in, and for a pull_request the PR its
// ref names, for a push the default branch.
package idtoken

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
)

// Errors, each a different answer to the asker.
var (
	// ErrInvalid is a token that does not verify (signature, issuer,
	// audience, expiry): 401.
	ErrInvalid = errors.New("idtoken: not a valid GitHub Actions ID token")
	// ErrNotCovered is a valid token whose claims do not cover the ask: 403.
	ErrNotCovered = errors.New("idtoken: the ID token does not cover this ask")
	// ErrUnavailable is an issuer that cannot be reached to learn its keys: 503.
	ErrUnavailable = errors.New("idtoken: the ID token issuer cannot be reached")
)

// Claims are the GitHub Actions claims opsbot reads.
type Claims struct {
	Repository   string `json:"repository"`
	RepositoryID string `json:"repository_id"`
	Ref          string `json:"ref"`
	WorkflowRef  string `json:"workflow_ref"`
	EventName    string `json:"event_name"`
	SHA          string `json:"sha"`
	RunID        string `json:"run_id"`
	Actor        string `json:"actor"`
}

// LooksLikeJWT reports whether a bearer has a JWT's shape (three base64url
// parts, a JSON header naming an algorithm); it verifies nothing.
func LooksLikeJWT(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	head, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	return json.Unmarshal(head, &h) == nil && h.Alg != ""
}

// Verifier checks ID tokens. The issuer's discovery document is fetched on
// the first token, not at start, so an unreachable issuer never stops opsbot
// from starting; until it answers, every token is refused (ErrUnavailable).
type Verifier struct {
	Issuer   string
	Audience string
	// Client fetches the discovery document and the keys; nil is a client
	// with a 10 s timeout.
	Client *http.Client
	// Now is the clock for expiry; nil is time.Now.
	Now func() time.Time
	// Served reports whether opsbot serves a repository; a token whose
	// (unverified) repository claim it does not serve is refused before the
	// issuer is asked for anything. nil skips that check.
	Served func(repo string) bool

	mu      sync.Mutex
	v       *oidc.IDTokenVerifier
	lastErr error     // the last discovery's failure,
	failed  time.Time // at this time: asks within retryAfter of it get it at once
}

// retryAfter is how long a failed discovery is answered from memory, so a
// burst of asks while the issuer is down does not queue up behind it.
const retryAfter = 5 * time.Second

// MinKeyRefetch is the least time between two fetches of the issuer's keys.
// go-oidc fetches them again for every token whose key id it does not know,
// and anyone can make such a token; within this interval the last answer
// stands in for a new fetch, so a flood of forged tokens costs the issuer
// (and opsbot) one request per interval. A real key rotation is picked up
// at most this late.
const MinKeyRefetch = 10 * time.Second

func (v *Verifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.v != nil {
		return v.v, nil
	}
	now := v.Now
	if now == nil {
		now = time.Now
	}
	if v.lastErr != nil && now().Sub(v.failed) < retryAfter {
		return nil, v.lastErr
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if v.Client != nil {
		c := *v.Client
		client = &c
	}
	client.Transport = &keyFetchLimiter{next: client.Transport, every: MinKeyRefetch, now: now,
		skip: strings.TrimSuffix(v.Issuer, "/") + "/.well-known/openid-configuration"}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(dctx, client), v.Issuer)
	if err != nil {
		err = fmt.Errorf("%w: discovering %s: %v", ErrUnavailable, v.Issuer, err)
		if ctx.Err() == nil {
			// The asker hanging up says nothing of the issuer: only a
			// failure of the issuer's own is answered from memory.
			v.lastErr, v.failed = err, now()
		}
		return nil, err
	}
	// The audience is checked by audienceIs (a trailing / aside), after the
	// signature.
	v.v = p.Verifier(&oidc.Config{SkipClientIDCheck: true, Now: now, SupportedSigningAlgs: []string{oidc.RS256}})
	return v.v, nil
}

// Verify checks raw's signature, issuer, audience and expiry, and returns
// its claims. It runs on ctx (the asker's, with a deadline): a token whose
// unverified claims could not pass is refused before the issuer is asked.
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	if err := v.precheck(raw); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	ver, err := v.verifier(ctx)
	if err != nil {
		return Claims{}, err
	}
	tok, err := ver.Verify(ctx, raw)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !audienceIs(tok.Audience, v.Audience) {
		return Claims{}, fmt.Errorf("%w: its audience is not %q (mint it with audience=%s)", ErrInvalid, v.Audience, v.Audience)
	}
	var c Claims
	if err := tok.Claims(&c); err != nil {
		return Claims{}, fmt.Errorf("%w: reading its claims: %v", ErrInvalid, err)
	}
	if c.Repository == "" || c.Ref == "" {
		return Claims{}, fmt.Errorf("%w: it has no repository or ref claim", ErrInvalid)
	}
	return c, nil
}

// precheck reads raw's claims without verifying them and refuses a token
// that could not pass anyway: another issuer or audience, expired, or for a
// repository opsbot does not serve. It spares the issuer (and opsbot) the
// key fetch such a token would cause; the signature is still checked after.
func (v *Verifier) precheck(raw string) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return errors.New("its claims are not base64url")
	}
	var c struct {
		Iss        string          `json:"iss"`
		Aud        json.RawMessage `json:"aud"`
		Exp        json.Number     `json:"exp"`
		Repository string          `json:"repository"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return errors.New("its claims are not JSON")
	}
	if c.Iss != v.Issuer {
		return fmt.Errorf("its issuer is %q, not the configured issuer %s", clip(c.Iss), v.Issuer)
	}
	var auds []string
	if json.Unmarshal(c.Aud, &auds) != nil {
		var one string
		if json.Unmarshal(c.Aud, &one) == nil {
			auds = []string{one}
		}
	}
	if !audienceIs(auds, v.Audience) {
		return fmt.Errorf("its audience is not %q (mint it with audience=%s)", v.Audience, v.Audience)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	exp, err := c.Exp.Float64()
	if err != nil || !time.Unix(int64(exp), 0).After(now()) {
		return errors.New("it has expired (or has no exp claim)")
	}
	if v.Served != nil && !v.Served(c.Repository) {
		return fmt.Errorf("its repository %q is not served by this opsbot", clip(c.Repository))
	}
	return nil
}

// audienceIs says whether a token's audiences hold want. A URL's trailing
// / is no part of it: the gate action takes its server input without one,
// and a configuration may name the same URL with one.
func audienceIs(auds []string, want string) bool {
	want = strings.TrimSuffix(want, "/")
	return want != "" && slices.ContainsFunc(auds, func(a string) bool { return strings.TrimSuffix(a, "/") == want })
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// keyFetchLimiter is the issuer client's transport: a GET of a URL other
// than skip (the discovery document, which has its own back-off) made less
// than every after the last one is answered with the last one's answer (or
// error) instead of going out.
type keyFetchLimiter struct {
	next  http.RoundTripper
	every time.Duration
	now   func() time.Time
	skip  string

	mu   sync.Mutex
	last map[string]*fetched
}

type fetched struct {
	at     time.Time
	status int
	header http.Header
	body   []byte
	err    error
}

func (l *keyFetchLimiter) RoundTrip(r *http.Request) (*http.Response, error) {
	next := l.next
	if next == nil {
		next = http.DefaultTransport
	}
	u := r.URL.String()
	if r.Method != http.MethodGet || u == l.skip {
		return next.RoundTrip(r)
	}
	l.mu.Lock()
	defer l.mu.Unlock() // one fetch at a time: go-oidc already makes them one at a time
	if f := l.last[u]; f != nil && l.now().Sub(f.at) < l.every {
		return f.response(r)
	}
	f := &fetched{at: l.now()}
	resp, err := next.RoundTrip(r)
	if err == nil {
		f.status, f.header = resp.StatusCode, resp.Header.Clone()
		f.body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	f.err = err
	if l.last == nil {
		l.last = map[string]*fetched{}
	}
	l.last[u] = f
	return f.response(r)
}

func (f *fetched) response(r *http.Request) (*http.Response, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &http.Response{StatusCode: f.status, Status: http.StatusText(f.status), Header: f.header.Clone(),
		Body: io.NopCloser(bytes.NewReader(f.body)), ContentLength: int64(len(f.body)), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// Scope decides which asks a token's claims cover.
type Scope struct {
	Cfg *config.Live
	// DefaultBranch reads a repository's default branch from GitHub; it is
	// asked once per repository, and only when the configuration does not
	// name the branch.
	DefaultBranch func(ctx context.Context, repo string) (string, error)

	mu       sync.Mutex
	branches map[string]string
}

// Covers returns nil when c covers the ask r, else an ErrNotCovered that
// says which claim does not match, or an error reading the default branch.
func (s *Scope) Covers(ctx context.Context, c Claims, r gate.Request) error {
	rc, ok := s.Cfg.Get().Repo(c.Repository)
	if !ok {
		return fmt.Errorf("%w: the token is for %s, which this opsbot does not serve", ErrNotCovered, c.Repository)
	}
	if !strings.EqualFold(c.Repository, r.Repo) {
		return fmt.Errorf("%w: the token is for %s, the ask is for %s", ErrNotCovered, c.Repository, r.Repo)
	}
	if rc.RepositoryID != 0 && c.RepositoryID != strconv.FormatInt(rc.RepositoryID, 10) {
		return fmt.Errorf("%w: the token's repository_id is %s, repos[].repository_id of %s is %d (was the repository deleted and re-created?)",
			ErrNotCovered, orNone(c.RepositoryID), rc.Name, rc.RepositoryID)
	}
	switch r.Event {
	case "", "pull_request", "pull_request_target":
		if c.EventName != "pull_request" {
			return fmt.Errorf("%w: the token's event_name is %s, an ask for PR #%d needs pull_request (a pull_request workflow's token)",
				ErrNotCovered, orNone(c.EventName), r.PR)
		}
		if want := fmt.Sprintf("refs/pull/%d/merge", r.PR); c.Ref != want {
			return fmt.Errorf("%w: the token's ref is %s, an ask for PR #%d needs %s (a pull_request workflow's token)",
				ErrNotCovered, c.Ref, r.PR, want)
		}
	case "push":
		if c.EventName != "push" {
			return fmt.Errorf("%w: the token's event_name is %s, a push ask needs push (a push workflow's token)", ErrNotCovered, orNone(c.EventName))
		}
		branch, err := s.defaultBranch(ctx, rc)
		if err != nil {
			return err
		}
		if want := "refs/heads/" + branch; c.Ref != want {
			return fmt.Errorf("%w: the token's ref is %s, a push ask needs the default branch %s", ErrNotCovered, c.Ref, want)
		}
	case "merge_group":
		if c.EventName != "merge_group" {
			return fmt.Errorf("%w: the token's event_name is %s, a merge group ask needs merge_group (a merge_group workflow's token)",
				ErrNotCovered, orNone(c.EventName))
		}
		// The group's branch, as GitHub minted it into the token: the ask
		// names no other.
		want := r.Ref
		if !strings.HasPrefix(want, "refs/") {
			want = "refs/heads/" + want
		}
		if c.Ref != want {
			return fmt.Errorf("%w: the token's ref is %s, the merge group ask names %s", ErrNotCovered, c.Ref, want)
		}
		// And the group's commit, as GitHub minted it into the token.
		if c.SHA == "" || !strings.EqualFold(c.SHA, r.SHA) {
			return fmt.Errorf("%w: the token's sha is %s, the merge group ask names %s", ErrNotCovered, orNone(c.SHA), orNone(r.SHA))
		}
	default:
		return fmt.Errorf("%w: event %q", ErrNotCovered, r.Event)
	}
	if rc.OIDCRequireWorkflow {
		prefix := strings.ToLower(rc.Name + "/" + rc.SweepWorkflow + "@")
		if !strings.HasPrefix(strings.ToLower(c.WorkflowRef), prefix) {
			return fmt.Errorf("%w: the token's workflow is %s, this repository requires %s", ErrNotCovered, c.WorkflowRef, rc.SweepWorkflow)
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return clip(s)
}

func (s *Scope) defaultBranch(ctx context.Context, rc *config.Repo) (string, error) {
	if rc.DefaultBranch != "" {
		return rc.DefaultBranch, nil
	}
	s.mu.Lock()
	b, ok := s.branches[rc.Name]
	s.mu.Unlock()
	if ok {
		return b, nil
	}
	if s.DefaultBranch == nil {
		return "", fmt.Errorf("no way to learn %s's default branch: set repos[].default_branch", rc.Name)
	}
	b, err := s.DefaultBranch(ctx, rc.Name)
	if err != nil {
		return "", fmt.Errorf("reading %s's default branch: %w", rc.Name, err)
	}
	if b == "" {
		return "", fmt.Errorf("GitHub named no default branch for %s: set repos[].default_branch", rc.Name)
	}
	s.mu.Lock()
	if s.branches == nil {
		s.branches = map[string]string{}
	}
	s.branches[rc.Name] = b
	s.mu.Unlock()
	return b, nil
}
