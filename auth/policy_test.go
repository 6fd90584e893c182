package auth_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

const repo = "SemiAnalysisAI/InferenceX"
const permRoute = "GET /repos/{owner}/{repo}/collaborators/{user}/permission"

func setup(t *testing.T) (*githubtest.Fake, *ghclient.Client) {
	t.Helper()
	f := githubtest.New(t)
	f.AddRepo(repo, "run-sweep.yml", 1)
	fac, err := ghclient.NewFactory(ghclient.Options{APIURL: f.URL, Token: "t", MaxTries: 2, RequestTimeout: 200 * time.Millisecond,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fac.For(0)
	return f, c
}

// Each role from none to admin against each minimum.
func TestRoleMatrix(t *testing.T) {
	f, gh := setup(t)
	roles := []string{"none", "read", "triage", "write", "maintain", "admin"}
	for i, r := range roles {
		f.AddUser("user-"+r, int64(100+i), "User")
		f.SetRole(repo, "user-"+r, r)
	}
	for _, min := range roles {
		minRole, _ := auth.ParseRole(min)
		for i, r := range roles {
			c := &auth.Checker{TTL: time.Minute}
			v := c.Check(t.Context(), gh, repo, auth.Actor{ID: int64(100 + i), Login: "user-" + r, Type: "User"}, auth.Policy{MinRole: minRole})
			want := i >= int(minRole)
			if v.Allowed != want {
				t.Errorf("role %s, min %s: allowed=%v, want %v (%s)", r, min, v.Allowed, want, v.Reason)
			}
			if !v.Allowed && (!strings.Contains(v.Reason, "`"+min+"`") || strings.Contains(v.Reason, r+"`")) && r != min {
				t.Errorf("denial %q must name the role needed and not the user's", v.Reason)
			}
		}
	}
}

func TestCustomRoleFallsBackToPermissions(t *testing.T) {
	f, gh := setup(t)
	f.AddUser("releaser", 7, "User")
	f.SetRole(repo, "releaser", "release-manager") // a custom role built on write
	c := &auth.Checker{TTL: time.Minute}
	v := c.Check(t.Context(), gh, repo, auth.Actor{ID: 7, Login: "releaser", Type: "User"}, auth.Policy{MinRole: auth.RoleWrite})
	if !v.Allowed || v.Role != auth.RoleWrite {
		t.Fatalf("custom role: %+v", v)
	}
}

func TestTeamsUsersBotsAndSelf(t *testing.T) {
	f, gh := setup(t)
	f.AddUser("reader", 1, "User")
	f.AddUser("teammate", 2, "User")
	f.AddUser("listed", 3, "User")
	f.AddUser("renovate[bot]", 4, "Bot")
	f.SetRole(repo, "reader", "read")
	f.SetRole(repo, "teammate", "read")
	f.SetRole(repo, "renovate[bot]", "write")
	f.AddTeamMember("SemiAnalysisAI/reviewers", "teammate")
	p := auth.Policy{MinRole: auth.RoleWrite, Users: []string{"Listed"}, UserIDs: []int64{3}, Teams: []string{"SemiAnalysisAI/reviewers"}}
	c := &auth.Checker{TTL: time.Minute, SelfID: githubtest.BotID, SelfLogin: githubtest.BotLogin}
	cases := []struct {
		actor auth.Actor
		pol   auth.Policy
		want  bool
		via   string
	}{
		{auth.Actor{ID: 1, Login: "reader", Type: "User"}, p, false, ""},
		{auth.Actor{ID: 2, Login: "teammate", Type: "User"}, p, true, "team"},
		{auth.Actor{ID: 3, Login: "listed", Type: "User"}, p, true, "user"},
		{auth.Actor{ID: 99, Login: "Listed", Type: "User"}, p, false, ""}, // the login, another account
		{auth.Actor{ID: 4, Login: "renovate[bot]", Type: "Bot"}, p, false, ""},
		{auth.Actor{ID: 4, Login: "renovate[bot]", Type: "Bot"}, auth.Policy{MinRole: auth.RoleWrite, AllowBots: []string{"renovate[bot]"}}, true, "role"},
		{auth.Actor{ID: githubtest.BotID, Login: githubtest.BotLogin, Type: "Bot"}, auth.Policy{MinRole: auth.RoleNone, AllowBots: []string{githubtest.BotLogin}}, false, ""},
	}
	for _, tc := range cases {
		v := c.Check(t.Context(), gh, repo, tc.actor, tc.pol)
		if v.Allowed != tc.want || v.Via != tc.via {
			t.Errorf("%s: %+v, want allowed=%v via %q", tc.actor.Login, v, tc.want, tc.via)
		}
	}
}

func TestRoleCacheByUserID(t *testing.T) {
	f, gh := setup(t)
	f.AddUser("alice", 10, "User")
	f.SetRole(repo, "alice", "write")
	now := time.Unix(1800000000, 0)
	c := &auth.Checker{TTL: 60 * time.Second, Now: func() time.Time { return now }}
	a := auth.Actor{ID: 10, Login: "alice", Type: "User"}
	for i := 0; i < 3; i++ {
		if v := c.Check(t.Context(), gh, repo, a, auth.Policy{MinRole: auth.RoleWrite}); !v.Allowed {
			t.Fatal(v.Reason)
		}
	}
	if n := f.Count(permRoute); n != 1 {
		t.Fatalf("%d permission reads within the TTL, want 1", n)
	}
	now = now.Add(61 * time.Second)
	c.Check(t.Context(), gh, repo, a, auth.Policy{MinRole: auth.RoleWrite})
	if n := f.Count(permRoute); n != 2 {
		t.Fatalf("%d permission reads after the TTL, want 2", n)
	}
}

// Team membership is answered by login: a member's login held now by
// another account (renamed) lets in neither, even when the permission
// answer names no account to compare with.
func TestTeamMembershipMatchesTheAccountID(t *testing.T) {
	f, gh := setup(t)
	f.AddUser("teammate", 2, "User")
	f.SetRole(repo, "teammate", "read")
	f.AddTeamMember("SemiAnalysisAI/reviewers", "teammate")
	p := auth.Policy{MinRole: auth.RoleWrite, Teams: []string{"SemiAnalysisAI/reviewers"}}
	c := &auth.Checker{TTL: time.Minute}
	f.Inject(permRoute, githubtest.Fault{Status: 200, Body: `{"permission":"read","role_name":"read"}`})
	v := c.Check(t.Context(), gh, repo, auth.Actor{ID: 98, Login: "teammate", Type: "User"}, p)
	if v.Allowed {
		t.Fatalf("account 98 holding member 2's login was let in: %+v", v)
	}
	if v := c.Check(t.Context(), gh, repo, auth.Actor{ID: 2, Login: "teammate", Type: "User"}, p); !v.Allowed || v.Via != "team" {
		t.Fatalf("the member's own account: %+v", v)
	}
}

// Any failure to learn the role denies, saying the check failed.
func TestLookupErrorsDeny(t *testing.T) {
	cases := map[string]githubtest.Fault{
		"500":       {Status: 500},
		"timeout":   {Delay: time.Second, Pass: true},
		"malformed": {Status: 200, Body: `{"permission": `},
		"no role":   {Status: 200, Body: `{"user":{"login":"alice","id":10}}`},
		"other id":  {Status: 200, Body: `{"permission":"admin","role_name":"admin","user":{"login":"alice","id":99}}`},
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			f, gh := setup(t)
			f.AddUser("alice", 10, "User")
			f.SetRole(repo, "alice", "admin")
			f.Inject(permRoute, fault)
			c := &auth.Checker{TTL: time.Minute}
			v := c.Check(t.Context(), gh, repo, auth.Actor{ID: 10, Login: "alice", Type: "User"}, auth.Policy{MinRole: auth.RoleWrite})
			if v.Allowed || !v.CheckFailed || !strings.Contains(v.Reason, "could not check your permission") {
				t.Fatalf("%+v", v)
			}
			if strings.Contains(v.Reason, "needs") {
				t.Fatal("a failed check must not claim the user lacks the role")
			}
			_ = fmt.Sprint()
		})
	}
}

// A 404 for the login (a deleted or renamed account) is no role, not a
// failed check. A failed lookup is remembered for the ErrorTTL (one read per
// user per minute while GitHub fails), and the role last learned is kept
// through it (Known), so a triage user can still be told to retry.
func TestMissingLoginHasNoRoleAndLookupErrorsAreRemembered(t *testing.T) {
	f, gh := setup(t)
	now := time.Unix(1800000000, 0)
	c := &auth.Checker{TTL: time.Minute, Now: func() time.Time { return now }}
	p := auth.Policy{MinRole: auth.RoleWrite}
	ghost := auth.Actor{ID: 11, Login: "ghost", Type: "User"} // no such account on GitHub: 404
	if v := c.Check(t.Context(), gh, repo, ghost, p); v.Allowed || v.CheckFailed || v.Role != auth.RoleNone {
		t.Fatalf("a login GitHub answers 404 for: %+v, want denied with role none (not a failed check)", v)
	}

	f.AddUser("tri", 12, "User")
	f.SetRole(repo, "tri", "triage")
	tri := auth.Actor{ID: 12, Login: "tri", Type: "User"}
	if v := c.Check(t.Context(), gh, repo, tri, p); v.Role != auth.RoleTriage {
		t.Fatalf("%+v", v)
	}
	now = now.Add(2 * time.Minute)                               // the role is stale
	f.Inject(permRoute, githubtest.Fault{Status: 502, Times: 2}) // one lookup and its retry
	var first int
	for i := 0; i < 5; i++ {
		v := c.Check(t.Context(), gh, repo, tri, p)
		if !v.CheckFailed || v.Known != auth.RoleTriage {
			t.Fatalf("check %d while GitHub fails: %+v, want CheckFailed with the triage role known", i, v)
		}
		if i == 0 {
			first = f.Count(permRoute)
		}
	}
	if n := f.Count(permRoute) - first; n != 0 {
		t.Fatalf("%d more permission reads for 4 more checks within a minute of a failure, want none", n)
	}
	f.AddUser("stranger", 13, "User")
	f.Inject(permRoute, githubtest.Fault{Status: 502, Times: 2})
	stranger := auth.Actor{ID: 13, Login: "stranger", Type: "User"}
	if v := c.Check(t.Context(), gh, repo, stranger, p); !v.CheckFailed || v.Known != auth.RoleUnknown {
		t.Fatalf("a never-seen user while GitHub fails: %+v, want CheckFailed with nothing known", v)
	}
	now = now.Add(61 * time.Second)
	f.SetRole(repo, "tri", "write")
	if v := c.Check(t.Context(), gh, repo, tri, p); !v.Allowed {
		t.Fatalf("after the error TTL the role is read again: %+v", v)
	}
}
