package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden" // defines -update for go test ./... -update
	"log/slog"
	"strings"
	"testing"
)

func TestVerifySignature(t *testing.T) {
	body := []byte(`{"action":"created"}`)
	secrets := []Secret{"current", "previous"}
	cases := []struct {
		name   string
		header string
		want   error
	}{
		{"current secret", Sign(body, "current"), nil},
		{"previous secret during rotation", Sign(body, "previous"), nil},
		{"other secret", Sign(body, "other"), ErrBadSignature},
		{"missing", "", ErrNoSignature},
		{"sha1", "sha1=" + strings.Repeat("0", 40), ErrBadSignature},
		{"not hex", "sha256=xyz", ErrBadSignature},
		{"short", "sha256=abcd", ErrBadSignature},
		{"body changed", Sign([]byte(`{"action":"deleted"}`), "current"), ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := VerifySignature(body, c.header, secrets); !errors.Is(got, c.want) {
				t.Fatalf("VerifySignature = %v, want %v", got, c.want)
			}
		})
	}
	if err := VerifySignature(body, Sign(body, ""), nil); !errors.Is(err, ErrNoSecrets) {
		t.Errorf("no secrets: %v, want ErrNoSecrets", err)
	}
	if err := VerifySignature(body, Sign(body, ""), []Secret{""}); !errors.Is(err, ErrBadSignature) {
		t.Errorf("empty secret: %v, want ErrBadSignature", err)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("hunter2")
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "secret", s)
	if out := b.String() + fmt.Sprint(s) + fmt.Sprintf("%v", s); strings.Contains(out, "hunter2") {
		t.Fatalf("secret leaked: %s", out)
	}
}

func TestTokenMatches(t *testing.T) {
	// Tokens are compared as SHA-256 digests (one length for all), so the
	// time taken does not say how long a configured token is; that timing
	// property is by construction, and this table checks the matching.
	tokens := []Secret{"a1", "b2", "", "gate-token-0123456789"}
	for tok, want := range map[string]bool{"a1": true, "b2": true, "a": false, "": false, "a1 ": false,
		"gate-token-0123456789": true, "gate-token-012345678": false, "gate-token-0123456789x": false, "gate-token-012345678X": false} {
		if got := TokenMatches(tok, tokens); got != want {
			t.Errorf("TokenMatches(%q) = %v, want %v", tok, got, want)
		}
	}
}

func TestPermissionResponseRole(t *testing.T) {
	cases := []struct {
		json string
		want Role
	}{
		{`{"permission":"write","role_name":"maintain","user":{"permissions":{"admin":false,"maintain":true,"push":true,"triage":true,"pull":true}}}`, RoleMaintain},
		{`{"permission":"read","role_name":"triage"}`, RoleTriage},
		{`{"permission":"write","role_name":"custom-release-role","user":{"permissions":{"admin":false,"maintain":false,"push":true,"triage":true,"pull":true}}}`, RoleWrite},
		{`{"permission":"write","user":{"permissions":{"admin":false,"maintain":true,"push":true,"pull":true}}}`, RoleMaintain},
		{`{"permission":"admin"}`, RoleAdmin},
		{`{"permission":"write"}`, RoleWrite},
		{`{"permission":"read"}`, RoleRead},
		{`{"permission":"none"}`, RoleNone},
		{`{"user":{"permissions":{"admin":false,"push":false,"pull":false}}}`, RoleNone},
		{`{}`, RoleUnknown},
		{`{"permission":"superuser"}`, RoleUnknown},
	}
	for _, c := range cases {
		var p PermissionResponse
		if err := json.Unmarshal([]byte(c.json), &p); err != nil {
			t.Fatal(err)
		}
		if got := p.Role(); got != c.want {
			t.Errorf("%s: Role = %v, want %v", c.json, got, c.want)
		}
	}
	if RoleUnknown >= RoleNone || RoleRead >= RoleTriage || RoleWrite >= RoleMaintain {
		t.Error("roles are not ranked none < read < triage < write < maintain < admin")
	}
}

// The policy is a pure function of the role and the lists.
func TestDecideIsPure(t *testing.T) {
	user := Actor{ID: 1, Login: "alice", Type: "User"}
	bot := Actor{ID: 2, Login: "renovate[bot]", Type: "Bot"}
	p := Policy{MinRole: RoleWrite, Users: []string{"Carol"}, UserIDs: []int64{3}, AllowBots: []string{"release[bot]"}}
	cases := []struct {
		name   string
		a      Actor
		self   bool
		role   Role
		team   bool
		allow  bool
		lookup bool // the verdict asks for the role first
	}{
		{"self", user, true, RoleAdmin, false, false, false},
		{"bot not listed", bot, false, RoleAdmin, false, false, false},
		{"listed bot by role", Actor{Login: "release[bot]", Type: "Bot"}, false, RoleWrite, false, true, false},
		{"listed user", Actor{ID: 3, Login: "carol"}, false, RoleUnknown, false, true, false},
		{"listed login, another account", Actor{ID: 9, Login: "Carol"}, false, RoleUnknown, false, false, true},
		{"listed login, another account, read", Actor{ID: 9, Login: "Carol"}, false, RoleRead, false, false, false},
		{"role unknown", user, false, RoleUnknown, false, false, true},
		{"read", user, false, RoleRead, false, false, false},
		{"write", user, false, RoleWrite, false, true, false},
		{"admin", user, false, RoleAdmin, false, true, false},
		{"read in a team", user, false, RoleRead, true, true, false},
	}
	for _, c := range cases {
		v := Decide(p, c.a, c.self, c.role, c.team)
		if v.Allowed != c.allow || (v.Reason == "" && !v.Allowed) != c.lookup {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

// A policy whose access rule could not be read lets nobody in: not the
// listed user, not an admin, not a team member (an unknown role ranks
// below every other, and taken as a minimum it would let everyone in).
func TestUnreadablePolicyDeniesEveryone(t *testing.T) {
	p := Policy{MinRole: RoleUnknown, Unreadable: `min_role "wrtie" is not a role`, UserIDs: []int64{3}}
	for _, c := range []struct {
		a    Actor
		role Role
		team bool
	}{{Actor{ID: 3, Login: "carol"}, RoleUnknown, false}, {Actor{ID: 1, Login: "alice"}, RoleAdmin, false}, {Actor{ID: 1, Login: "alice"}, RoleRead, true}} {
		if v := Decide(p, c.a, false, c.role, c.team); v.Allowed || !strings.Contains(v.Reason, "cannot be read") {
			t.Errorf("%+v (%s): %+v", c.a, c.role, v)
		}
	}
}

type fakeUsers struct {
	ids   map[string]int64
	reads int
}

func (f *fakeUsers) UserID(_ context.Context, login string) (int64, error) {
	f.reads++
	if id, ok := f.ids[login]; ok {
		return id, nil
	}
	return 0, errors.New("not found")
}

// Each login is read once; one that does not resolve allows nobody, and
// is not looked up again.
func TestDirectoryResolvesOnceAndFailsClosed(t *testing.T) {
	l := &fakeUsers{ids: map[string]int64{"carol": 3}}
	var failed []string
	d := &Directory{Record: func(login string, id int64, err error) {
		if err != nil {
			failed = append(failed, login)
		}
	}}
	d.Resolve(context.Background(), l, []string{"carol", "ghost"})
	d.Resolve(context.Background(), l, []string{"Carol", "ghost"})
	if l.reads != 2 {
		t.Fatalf("%d reads, want 2 (one each)", l.reads)
	}
	if got := d.IDs([]string{"CAROL", "ghost", "never"}); len(got) != 1 || got[0] != 3 {
		t.Fatalf("IDs = %v, want [3]", got)
	}
	if len(failed) != 1 || failed[0] != "ghost" {
		t.Fatalf("failures recorded = %v", failed)
	}
	l.ids["ghost"] = 9
	d.Resolve(context.Background(), l, []string{"ghost"})
	if got := d.IDs([]string{"ghost"}); len(got) != 0 {
		t.Fatalf("a login that did not resolve at start allows %v", got)
	}
}

// A login bound before keeps its stored account whatever GitHub answers
// now; a disagreeing answer is reported, and nothing new is recorded.
func TestDirectoryKeepsStoredBindings(t *testing.T) {
	l := &fakeUsers{ids: map[string]int64{"carol": 666, "dave": 4}}
	var recorded, disagreed []string
	d := &Directory{
		Record: func(login string, id int64, err error) { recorded = append(recorded, login) },
		Stored: func(login string) (int64, bool) { return map[string]int64{"carol": 3}[login], login == "carol" },
		Disagree: func(login string, stored, now int64, err error) {
			disagreed = append(disagreed, fmt.Sprintf("%s %d %d", login, stored, now))
		},
	}
	d.Resolve(context.Background(), l, []string{"carol", "dave"})
	if got := d.IDs([]string{"carol", "dave"}); len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("IDs = %v, want [3 4] (carol's stored account, dave resolved)", got)
	}
	if len(recorded) != 1 || recorded[0] != "dave" || len(disagreed) != 1 || disagreed[0] != "carol 3 666" {
		t.Fatalf("recorded %v, disagreed %v", recorded, disagreed)
	}
}

// The digest of a signed delivery is the same for the same event and
// signature, and differs for another of either.
func TestSignatureDigest(t *testing.T) {
	sig := "sha256=" + strings.Repeat("ab", 32)
	a, ok := SignatureSum("issue_comment", sig)
	b, _ := SignatureSum("issue_comment", sig)
	c, _ := SignatureSum("pull_request", sig)
	d, _ := SignatureSum("issue_comment", "sha256="+strings.Repeat("cd", 32))
	if !ok || a != b || a == c || a == d {
		t.Fatalf("digests: %x %x %x %x", a, b, c, d)
	}
	if _, ok := SignatureSum("issue_comment", "sha1=00"); ok {
		t.Fatal("a header that is no sha256 signature gave a digest")
	}
}
