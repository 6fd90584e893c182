package auth

import (
	"fmt"
	"strings"
)

// Role is a collaborator's role on a repository, ranked.
type Role int

// Roles from least to most. RoleUnknown sorts below none and is never enough.
const (
	RoleUnknown Role = iota - 1
	RoleNone
	RoleRead
	RoleTriage
	RoleWrite
	RoleMaintain
	RoleAdmin
)

var roleNames = [...]string{"none", "read", "triage", "write", "maintain", "admin"}

func (r Role) String() string {
	if r < RoleNone || int(r) >= len(roleNames) {
		return "unknown"
	}
	return roleNames[r]
}

// ParseRole reads a role name as GitHub and the config spell it. GitHub's
// older names pull (read) and push (write) are accepted too.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none":
		return RoleNone, nil
	case "read", "pull":
		return RoleRead, nil
	case "triage":
		return RoleTriage, nil
	case "write", "push":
		return RoleWrite, nil
	case "maintain":
		return RoleMaintain, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleUnknown, fmt.Errorf("auth: unknown role %q", s)
}

// PermissionResponse is the part of GitHub's
// GET /repos/{o}/{r}/collaborators/{user}/permission answer opsbot reads.
type PermissionResponse struct {
	Permission string `json:"permission"`
	RoleName   string `json:"role_name"`
	User       *struct {
		ID          int64           `json:"id"`
		Login       string          `json:"login"`
		Type        string          `json:"type"`
		Permissions map[string]bool `json:"permissions"`
	} `json:"user"`
}

// Role ranks the answer: role_name when GitHub gives a known one, else the
// highest true entry of user.permissions, else the legacy permission field
// (which folds maintain into write and triage into read). A custom role name
// falls through to the permissions. No usable field gives RoleUnknown.
func (p PermissionResponse) Role() Role {
	if r, err := ParseRole(p.RoleName); err == nil && p.RoleName != "" {
		return r
	}
	if p.User != nil && len(p.User.Permissions) > 0 {
		best := RoleUnknown
		for name, ok := range p.User.Permissions {
			if !ok {
				continue
			}
			if r, err := ParseRole(name); err == nil && r > best {
				best = r
			}
		}
		if best == RoleUnknown {
			best = RoleNone
		}
		return best
	}
	if r, err := ParseRole(p.Permission); err == nil {
		return r
	}
	return RoleUnknown
}
