package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// An ID token covers only the kind of ask its job's event is: a PR ask needs
// a pull_request job's token, a push ask a push job's, so a token of a job
// on the default branch triggered by something else (a comment, a schedule,
// another workflow) asks nothing. With repos[].repository_id set, the token
// must also be from that repository id, so a repository deleted and
// re-created (or renamed) under the served name is not taken for it.
func TestIDTokenCoversOnlyItsEventAndRepositoryID(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	w := newWorldWith(t, oidcConfig(is.URL), "    repository_id: 4242\n", nil)
	pushAsk := url.Values{"repo": {theRepo}, "event": {"push"}, "sha": {sha("a1")}}.Encode()
	branch := map[string]any{"ref": "refs/heads/main", "repository_id": "4242"}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for kk, vv := range m {
			if kk != k {
				out[kk] = vv
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		body   string
		code   int
		want   string
	}{
		{"a comment job's token for a push ask", with(branch, "event_name", "issue_comment"), pushAsk, 403, `event_name is issue_comment, a push ask needs push`},
		{"a schedule job's token for a push ask", with(branch, "event_name", "schedule"), pushAsk, 403, `a push ask needs push`},
		{"a workflow_run job's token for a push ask", with(branch, "event_name", "workflow_run"), pushAsk, 403, `a push ask needs push`},
		{"a pull_request_target token with a PR ref", map[string]any{"event_name": "pull_request_target", "repository_id": "4242"},
			askForm(thePR, sha("c1")), 403, `an ask for PR #2512 needs pull_request`},
		{"a push job's token", with(branch, "event_name", "push"), pushAsk, 200, "merged no pull request"},
		{"another repository id", map[string]any{"repository_id": "999"}, askForm(thePR, sha("c1")), 403,
			"repository_id is 999, repos[].repository_id of " + theRepo + " is 4242"},
		{"no repository id", map[string]any{"repository_id": nil}, askForm(thePR, sha("c1")), 403, "repository_id is"},
		{"its PR's token", map[string]any{"repository_id": "4242"}, askForm(thePR, sha("c1")), 200, `"decision":"sweep"`},
	} {
		r := w.call(http.MethodPost, "/api/v1/gate", is.token(t, tc.claims), "", tc.body)
		if r.code != tc.code || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, r.code, r.body, tc.code, tc.want)
		}
	}
}
