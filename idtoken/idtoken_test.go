package idtoken

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

func TestCovers(t *testing.T) {
	cfg, err := config.Parse([]byte(`repos:
  - name: Org/Bench
    sweep_workflow: .github/workflows/run-sweep.yml
    oidc_require_workflow: true
  - name: org/other
    sweep_workflow: .github/workflows/run-sweep.yml
    default_branch: trunk
`))
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	s := &Scope{Cfg: config.NewLive(cfg), DefaultBranch: func(ctx context.Context, repo string) (string, error) {
		reads++
		return "main", nil
	}}
	wf := "org/bench/.github/workflows/run-sweep.yml@refs/pull/7/merge"
	pr := Claims{Repository: "org/bench", Ref: "refs/pull/7/merge", WorkflowRef: wf, EventName: "pull_request"}
	for _, tc := range []struct {
		name string
		c    Claims
		r    gate.Request
		ok   bool
	}{
		{"its PR", pr, gate.Request{Repo: "Org/Bench", PR: 7, Event: "pull_request"}, true},
		{"no event means pull_request", pr, gate.Request{Repo: "org/bench", PR: 7}, true},
		{"another PR", pr, gate.Request{Repo: "org/bench", PR: 8}, false},
		{"pull_request_target names the base branch", Claims{Repository: "org/bench", Ref: "refs/heads/main", WorkflowRef: wf},
			gate.Request{Repo: "org/bench", PR: 7, Event: "pull_request_target"}, false},
		{"push from the default branch", Claims{Repository: "org/bench", Ref: "refs/heads/main", EventName: "push", WorkflowRef: "org/bench/.github/workflows/run-sweep.yml@refs/heads/main"},
			gate.Request{Repo: "org/bench", Event: "push"}, true},
		{"push from the configured default branch", Claims{Repository: "org/other", Ref: "refs/heads/trunk", EventName: "push"}, gate.Request{Repo: "org/other", Event: "push"}, true},
		{"push from main where trunk is the default", Claims{Repository: "org/other", Ref: "refs/heads/main", EventName: "push"}, gate.Request{Repo: "org/other", Event: "push"}, false},
		{"a tag", Claims{Repository: "org/bench", Ref: "refs/tags/main", EventName: "push", WorkflowRef: wf}, gate.Request{Repo: "org/bench", Event: "push"}, false},
		{"another workflow", Claims{Repository: "org/bench", Ref: "refs/pull/7/merge", EventName: "pull_request", WorkflowRef: "org/bench/.github/workflows/run-sweep.yml.evil@x"},
			gate.Request{Repo: "org/bench", PR: 7}, false},
		{"unserved repository", Claims{Repository: "org/bench2", Ref: "refs/pull/7/merge", EventName: "pull_request"}, gate.Request{Repo: "org/bench2", PR: 7}, false},
		{"another event", pr, gate.Request{Repo: "org/bench", PR: 7, Event: "release"}, false},
		{"its merge group", Claims{Repository: "org/bench", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20), EventName: "merge_group",
			WorkflowRef: "org/bench/.github/workflows/run-sweep.yml@refs/heads/gh-readonly-queue/main/pr-7-x", SHA: strings.Repeat("cd", 20)},
			gate.Request{Repo: "org/bench", Event: "merge_group", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20),
				SHA: strings.Repeat("CD", 20)}, true},
		{"its merge group, another commit", Claims{Repository: "org/bench", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20),
			EventName: "merge_group", SHA: strings.Repeat("cd", 20)},
			gate.Request{Repo: "org/bench", Event: "merge_group", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20),
				SHA: strings.Repeat("ef", 20)}, false},
		{"its merge group, a token without a sha", Claims{Repository: "org/bench", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20),
			EventName: "merge_group"},
			gate.Request{Repo: "org/bench", Event: "merge_group", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20),
				SHA: strings.Repeat("cd", 20)}, false},
		{"another PR's merge group", Claims{Repository: "org/bench", Ref: "refs/heads/gh-readonly-queue/main/pr-7-" + strings.Repeat("ab", 20), EventName: "merge_group",
			WorkflowRef: "org/bench/.github/workflows/run-sweep.yml@x"},
			gate.Request{Repo: "org/bench", Event: "merge_group", Ref: "refs/heads/gh-readonly-queue/main/pr-8-" + strings.Repeat("ab", 20)}, false},
		{"a push token for a merge group", Claims{Repository: "org/bench", Ref: "refs/heads/main", EventName: "push", WorkflowRef: wf},
			gate.Request{Repo: "org/bench", Event: "merge_group", Ref: "refs/heads/main"}, false},
		{"a default-branch job of another event for a push", Claims{Repository: "org/bench", Ref: "refs/heads/main", EventName: "issue_comment"},
			gate.Request{Repo: "org/bench", Event: "push"}, false},
		{"a pull_request_target job for a PR", Claims{Repository: "org/bench", Ref: "refs/pull/7/merge", EventName: "pull_request_target", WorkflowRef: wf},
			gate.Request{Repo: "org/bench", PR: 7}, false},
	} {
		err := s.Covers(t.Context(), tc.c, tc.r)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrNotCovered) {
			t.Errorf("%s: %v, want ErrNotCovered", tc.name, err)
		}
	}
	if reads != 1 {
		t.Errorf("the default branch was read %d times, want once", reads)
	}
	broken := &Scope{Cfg: config.NewLive(cfg), DefaultBranch: func(ctx context.Context, repo string) (string, error) { return "", errors.New("502") }}
	if err := broken.Covers(t.Context(), Claims{Repository: "org/bench", Ref: "refs/heads/main", EventName: "push"}, gate.Request{Repo: "org/bench", Event: "push"}); err == nil || errors.Is(err, ErrNotCovered) {
		t.Errorf("default branch unreadable: %v, want an error that is not ErrNotCovered", err)
	}
}

// The issuer is discovered on the first token; while it is down tokens are
// refused with ErrUnavailable (answered from memory for a few seconds), and
// once it answers they verify.
func TestVerifierDiscoversLazily(t *testing.T) {
	is := testkit.NewIssuer(t)
	is.Down.Store(true)
	key, url, discoveries := is.Key, is.URL, &is.Discoveries
	clock := time.Now()
	v := &Verifier{Issuer: url, Audience: "opsbot", Now: func() time.Time { return clock }}
	if discoveries.Load() != 0 {
		t.Fatal("discovered before any token")
	}
	tok := sign(t, key, map[string]any{"iss": url, "aud": "opsbot", "exp": clock.Add(time.Minute).Unix(), "iat": clock.Unix(),
		"repository": "org/bench", "ref": "refs/pull/7/merge"})
	for range 3 {
		if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("issuer down: %v, want ErrUnavailable", err)
		}
	}
	if n := discoveries.Load(); n != 1 {
		t.Fatalf("%d discoveries in the back-off, want 1", n)
	}
	is.Down.Store(false)
	clock = clock.Add(retryAfter)
	c, err := v.Verify(t.Context(), tok)
	if err != nil || c.Repository != "org/bench" || c.Ref != "refs/pull/7/merge" {
		t.Fatalf("issuer up: %+v %v", c, err)
	}
	noRef := sign(t, key, map[string]any{"iss": url, "aud": "opsbot", "exp": clock.Add(time.Minute).Unix(), "repository": "org/bench"})
	if _, err := v.Verify(t.Context(), noRef); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a token without ref: %v, want ErrInvalid", err)
	}
	if LooksLikeJWT("test-api-token") || LooksLikeJWT("a.b.c") || !LooksLikeJWT(tok) {
		t.Fatal("LooksLikeJWT")
	}
}

func sign(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	return testkit.SignJWT(t, key, testkit.KeyID, claims)
}

// newFakeIssuer is a local issuer that counts its requests.
func newFakeIssuer(t *testing.T) *testkit.Issuer { return testkit.NewIssuer(t) }

// forge makes a token with header kid and claims, signed with no real key.
func forge(kid string, claims map[string]any) string {
	enc := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": kid})
	c, _ := json.Marshal(claims)
	return enc(h) + "." + enc(c) + "." + enc(make([]byte, 256))
}

// A bearer that merely looks like a JWT drives no request to the issuer
// unless its unverified claims name the issuer, the audience, a future
// expiry and a served repository; and forged tokens that do, whatever key id
// they name, refetch the issuer's keys at most once per refetch interval.
func TestForgedIDTokensDoNotDriveKeyFetches(t *testing.T) {
	is := newFakeIssuer(t)
	clock := time.Now()
	v := &Verifier{Issuer: is.URL, Audience: "opsbot", Now: func() time.Time { return clock },
		Served: func(repo string) bool { return repo == "org/bench" }}
	good := map[string]any{"iss": is.URL, "aud": []string{"other", "opsbot"}, "exp": clock.Add(time.Minute).Unix(), "repository": "org/bench", "ref": "refs/pull/7/merge"}
	with := func(k string, val any) map[string]any {
		c := maps.Clone(good)
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		want   string
	}{
		{"another issuer", with("iss", "https://evil.example"), "issuer"},
		{"another audience", with("aud", "sigstore"), "audience"},
		{"no audience", with("aud", nil), "audience"},
		{"expired", with("exp", clock.Add(-time.Second).Unix()), "expired"},
		{"no expiry", with("exp", nil), "expired"},
		{"unserved repository", with("repository", "org/bench2"), "not served"},
	} {
		for range 20 {
			_, err := v.Verify(t.Context(), forge("x", tc.claims))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v, want ErrInvalid naming %q", tc.name, err, tc.want)
			}
		}
	}
	if d, k := is.Discoveries.Load(), is.KeyFetches.Load(); d+k != 0 {
		t.Fatalf("tokens refused by their claims made %d discoveries and %d key fetches, want none", d, k)
	}
	for i := range 50 {
		if _, err := v.Verify(t.Context(), forge(fmt.Sprintf("kid-%d", i), good)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("forged token: %v, want ErrInvalid", err)
		}
	}
	if n := is.KeyFetches.Load(); n != 1 {
		t.Fatalf("50 forged tokens in one refetch interval fetched the keys %d times, want 1", n)
	}
	real := sign(t, is.Key, good)
	if _, err := v.Verify(t.Context(), real); err != nil {
		t.Fatalf("a real token with a known key: %v", err)
	}
	clock = clock.Add(MinKeyRefetch)
	good["exp"] = clock.Add(time.Minute).Unix()
	// go-oidc frees its last fetch a moment after it answers, and until then
	// hands that answer out again: keep forging until the key set refetches
	// (bounded), then check it did so once.
	for i, deadline := 0, time.Now().Add(10*time.Second); is.KeyFetches.Load() < 2 && time.Now().Before(deadline); i++ {
		v.Verify(t.Context(), forge(fmt.Sprintf("later-%d", i), good))
	}
	for i := range 10 {
		v.Verify(t.Context(), forge(fmt.Sprintf("again-%d", i), good))
	}
	if n := is.KeyFetches.Load(); n != 2 {
		t.Fatalf("after the interval the keys were fetched %d times in all, want 2", n)
	}
}

// A verification runs on the asker's context: an asker that hangs up during
// discovery is not taken for the issuer being down, so the next asker is
// not refused from memory.
func TestAskerHangingUpIsNotAnIssuerOutage(t *testing.T) {
	is := newFakeIssuer(t)
	v := &Verifier{Issuer: is.URL, Audience: "opsbot"}
	tok := sign(t, is.Key, map[string]any{"iss": is.URL, "aud": "opsbot", "exp": time.Now().Add(time.Minute).Unix(),
		"repository": "org/bench", "ref": "refs/pull/7/merge"})
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := v.Verify(gone, tok); err == nil {
		t.Fatal("verified on a cancelled context")
	}
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("the next asker: %v, want the token verified", err)
	}
}
