package runs

import "github.com/SemiAnalysisAI/opsbot/ghclient"

// Validators builds the run validator of an installation's client: the one
// place the gate and commands get theirs.
type Validators struct {
	Clients *ghclient.Clients
	Reused  ReusedLookup
	// Approvals binds dispatched runs to approved heads (nil: none).
	Approvals Approvals
	jobs      jobCache // every validator's jobs read, kept once
}

// For is the validator reading through the installation's client.
func (v *Validators) For(installation int64) (*Validator, error) {
	c, err := v.Clients.For(installation)
	if err != nil {
		return nil, err
	}
	return &Validator{GH: c, Reused: v.Reused, Approvals: v.Approvals, jobs: &v.jobs}, nil
}
