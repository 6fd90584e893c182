package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// Policy is who may run one command on one repository.
type Policy struct {
	MinRole Role
	Users   []string // allow_users logins as configured, for display
	// UserIDs are the accounts allowed whatever their role: the ids the
	// Users logins resolved to (Directory). A login is not an identity
	// (renamed and deleted accounts' logins are taken by others), so a
	// commenter is listed only by id; a login that did not resolve allows
	// nobody.
	UserIDs   []int64
	Teams     []string // ORG/SLUG whose members are allowed
	AllowBots []string // bot logins whose commands are read at all
	// Unreadable, when set, says why the command's access rule could not
	// be read (a min_role that is no role): nobody may run it, whatever
	// their role or listing.
	Unreadable string
}

// NoAnswer is how every reply says that a check failed because GitHub did
// not answer it (an error or a timeout): the check denies, and the reader is
// told to try again in a minute.
const NoAnswer = "GitHub did not answer"

// Actor is who wrote a comment. Identity is the id; the login is for display.
type Actor struct {
	ID    int64
	Login string
	Type  string // User, Bot, Organization
}

// Verdict is the answer to "may this actor run this command here?".
type Verdict struct {
	Allowed bool
	Role    Role   // the role found, RoleUnknown when not looked up or the lookup failed
	Via     string // role, user, team
	// Reason is what a user may be told: on a denial, what is needed, never more.
	Reason string
	// CheckFailed is set when GitHub could not answer; the verdict then denies.
	CheckFailed bool
	// Known is, when CheckFailed, the role the checker last learned for
	// the actor on the repository (RoleUnknown when it never did): who may
	// be told that the check failed.
	Known Role
	Err   error // the lookup error, for logs
}

// Lookup is what the checker asks GitHub.
type Lookup interface {
	Permission(ctx context.Context, repo, login string) (PermissionResponse, error)
	TeamMember(ctx context.Context, team, login string) (bool, error)
	UserID(ctx context.Context, login string) (int64, error)
}

// Checker decides verdicts, remembering roles and team memberships for a
// while so repeated commands cost no API calls.
type Checker struct {
	SelfID    int64
	SelfLogin string
	TTL       time.Duration
	Now       func() time.Time

	// ErrorTTL is how long a failed lookup is remembered (and answered
	// again without asking GitHub); 0 means DefaultErrorTTL. So commenters
	// cannot drive one permission read per comment while GitHub fails.
	ErrorTTL time.Duration

	mu    sync.Mutex
	cache map[string]cachedValue // roles and team memberships, by user id
}

// DefaultErrorTTL is Checker.ErrorTTL when 0.
const DefaultErrorTTL = time.Minute

// ErrNoSuchUser is what a Lookup's Permission answers (wrapped) when
// GitHub has no account of that login (404): a deleted or renamed account,
// which holds no role.
var ErrNoSuchUser = errors.New("auth: no such user")

type cachedValue struct {
	v  int
	at time.Time
	ok bool // v is an answer; the last error otherwise
	// lastV is the last answer (hasLast), kept past the TTL and through
	// errors: what is known of the user when GitHub cannot tell
	hasLast bool
	lastV   int
	err     error
	errAt   time.Time
}

// Decide is the policy itself, a pure function: whether a may run a
// command guarded by p, given a's role (RoleUnknown when not looked up) and
// whether a is in one of p's teams. self says a is opsbot's own account.
// A verdict with Role RoleUnknown and no decision yet (Allowed false, Reason
// "") means the role must be looked up first.
func Decide(p Policy, a Actor, self bool, role Role, inTeam bool) Verdict {
	switch {
	case p.Unreadable != "":
		return Verdict{Reason: "this command's access rule cannot be read (" + p.Unreadable + "): nobody may run it until an opsbot admin fixes the configuration",
			Role: RoleUnknown}
	case self:
		return Verdict{Reason: "opsbot does not take commands from itself", Role: RoleUnknown}
	case strings.EqualFold(a.Type, "Bot") && !containsFold(p.AllowBots, a.Login):
		return Verdict{Reason: "commands from bot accounts are not run unless the bot is listed in `allow_bots`; " + Needed(p), Role: RoleUnknown}
	case a.ID != 0 && slices.Contains(p.UserIDs, a.ID):
		return Verdict{Allowed: true, Via: "user", Role: RoleUnknown}
	case role == RoleUnknown:
		return Verdict{Role: RoleUnknown} // look the role up
	case role >= p.MinRole:
		return Verdict{Allowed: true, Via: "role", Role: role}
	case inTeam:
		return Verdict{Allowed: true, Via: "team", Role: role}
	}
	return Verdict{Role: role, Reason: Needed(p)}
}

// Check answers for actor a running a command guarded by p on repo, looking
// up what Decide needs. Any error while looking up denies (fail closed)
// with CheckFailed set.
func (c *Checker) Check(ctx context.Context, l Lookup, repo string, a Actor, p Policy) Verdict {
	v := Decide(p, a, c.isSelf(a), RoleUnknown, false)
	if v.Allowed || v.Reason != "" {
		return v
	}
	role, err := c.role(ctx, l, repo, a)
	if err != nil {
		return Verdict{Role: RoleUnknown, CheckFailed: true, Err: err, Known: c.known(repo, a),
			Reason: fmt.Sprintf("could not check your permission on %s (%s); please try again in a minute", repo, NoAnswer)}
	}
	if v := Decide(p, a, false, role, false); v.Allowed || len(p.Teams) == 0 {
		return v
	}
	for _, team := range p.Teams {
		member, err := c.member(ctx, l, team, a)
		if err != nil {
			return Verdict{Role: role, CheckFailed: true, Err: err, Known: role,
				Reason: fmt.Sprintf("could not check your team membership on %s (%s); please try again in a minute", repo, NoAnswer)}
		}
		if member {
			return Decide(p, a, false, role, true)
		}
	}
	return Decide(p, a, false, role, false)
}

// Needed says what a policy asks for, in words for a reply.
func Needed(p Policy) string {
	s := fmt.Sprintf("this command needs the %s role on the repository or above", mdtext.Code(p.MinRole.String()))
	if len(p.Teams) > 0 {
		s += ", or membership of " + mdtext.CodeList(p.Teams)
	}
	return s
}

// Describe is who the policy lets in, as Markdown: "the `write` role or
// above, or membership of `org/team`".
func (p Policy) Describe() string {
	s := fmt.Sprintf("the %s role or above", mdtext.Code(p.MinRole.String()))
	if len(p.Teams) > 0 {
		s += ", or membership of " + mdtext.CodeList(p.Teams)
	}
	return s
}

func (c *Checker) isSelf(a Actor) bool {
	return (c.SelfID != 0 && a.ID == c.SelfID) || (c.SelfLogin != "" && strings.EqualFold(a.Login, c.SelfLogin))
}

func (c *Checker) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Checker) role(ctx context.Context, l Lookup, repo string, a Actor) (Role, error) {
	key := fmt.Sprintf("role\x00%s\x00%d", strings.ToLower(repo), a.ID)
	v, err := c.cached(key, func() (int, error) {
		resp, err := l.Permission(ctx, repo, a.Login)
		if errors.Is(err, ErrNoSuchUser) {
			return int(RoleNone), nil // no account holds the login now: no role
		}
		if err != nil {
			return 0, err
		}
		if resp.User != nil && resp.User.ID != 0 && a.ID != 0 && resp.User.ID != a.ID {
			// The login now names another account (renamed): do not trust it.
			return 0, fmt.Errorf("auth: login %s now belongs to account %d, not %d", a.Login, resp.User.ID, a.ID)
		}
		role := resp.Role()
		if role == RoleUnknown {
			return 0, fmt.Errorf("auth: GitHub's permission answer for %s has no role", a.Login)
		}
		return int(role), nil
	})
	if err != nil {
		return RoleUnknown, err
	}
	return Role(v), nil
}

func (c *Checker) member(ctx context.Context, l Lookup, team string, a Actor) (bool, error) {
	key := fmt.Sprintf("team\x00%s\x00%d", strings.ToLower(team), a.ID)
	v, err := c.cached(key, func() (int, error) {
		m, err := l.TeamMember(ctx, team, a.Login)
		if err != nil || !m {
			return 0, err
		}
		// GitHub answers membership by login, and a login is not an
		// identity (a renamed account's login is taken by another): the
		// member is the commenter only if the login names the commenter's
		// account now.
		id, err := l.UserID(ctx, a.Login)
		if err != nil {
			return 0, err
		}
		if a.ID == 0 || id != a.ID {
			return 0, nil
		}
		return 1, nil
	})
	return v == 1, err
}

// cached answers key from the cache while it is fresh, else asks lookup and
// remembers a successful answer for the TTL. An error is remembered for the
// ErrorTTL and answered again until then; the last answer is kept through
// it (known).
func (c *Checker) cached(key string, lookup func() (int, error)) (int, error) {
	now := c.now()
	c.mu.Lock()
	if e, ok := c.cache[key]; ok {
		if e.ok && now.Sub(e.at) < c.TTL {
			c.mu.Unlock()
			return e.v, nil
		}
		if e.err != nil && now.Sub(e.errAt) < c.errorTTL() {
			c.mu.Unlock()
			return 0, e.err
		}
	}
	c.mu.Unlock()
	v, err := lookup()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[string]cachedValue{}
	}
	e := c.cache[key]
	if err != nil {
		e.ok, e.err, e.errAt = false, err, c.now()
		c.cache[key] = e
		return 0, err
	}
	c.cache[key] = cachedValue{v: v, at: c.now(), ok: true, hasLast: true, lastV: v}
	return v, nil
}

func (c *Checker) errorTTL() time.Duration {
	if c.ErrorTTL > 0 {
		return c.ErrorTTL
	}
	return DefaultErrorTTL
}

// known is the role last learned for a on repo, however long ago;
// RoleUnknown when none was.
func (c *Checker) known(repo string, a Actor) Role {
	key := fmt.Sprintf("role\x00%s\x00%d", strings.ToLower(repo), a.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[key]; ok && e.hasLast {
		return Role(e.lastV)
	}
	return RoleUnknown
}

func containsFold(xs []string, s string) bool {
	for _, x := range xs {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
