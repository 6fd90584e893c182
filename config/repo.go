package config

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Repo is one repository opsbot serves.
type Repo struct {
	Name            string   `yaml:"name"`
	SweepWorkflow   string   `yaml:"sweep_workflow"`
	ResultArtifacts []string `yaml:"result_artifacts"`
	GateActions     []string `yaml:"gate_actions"`
	SlackChannel    string   `yaml:"slack_channel"`
	AllowBots       []string `yaml:"allow_bots"`
	Reuse           Reuse    `yaml:"reuse"`
	Stage           Stage    `yaml:"stage"`
	External        External `yaml:"external"`
	Help            Access   `yaml:"help"`
	// DefaultBranch is the branch a push ask's ID token must be for; when
	// empty it is read from GitHub once.
	DefaultBranch string `yaml:"default_branch"`
	// OIDCRequireWorkflow makes a gate ask's ID token name sweep_workflow
	// in its workflow_ref.
	OIDCRequireWorkflow bool `yaml:"oidc_require_workflow"`
	// ProtectedPaths are globs the PR must not have changed up to a run's
	// commit for the run to be pinned, used or staged (a pull_request run
	// executes the PR's own workflow files). Absent: DefaultProtectedPaths;
	// an empty list opts out, and Warnings says so.
	ProtectedPaths []string `yaml:"protected_paths"`
	// RepositoryID, when set, is the GitHub id an ID token's repository_id
	// claim must carry; otherwise a repository is matched by name only.
	RepositoryID int64 `yaml:"repository_id"`
	// MainSweeps says whether a push to the default branch runs a sweep of
	// its own (absent: true). When false, the push gate answers
	// reuse-enabled=true also with the merged PR's final head's own real
	// sweep, since nothing else gives the default branch results.
	MainSweeps *bool `yaml:"main_sweeps"`
	// GPUsPerRunner maps runner label globs to the GPUs a runner with such
	// a label has: the runner time a reuse saves, weighed into GPU time.
	GPUsPerRunner map[string]int `yaml:"gpus_per_runner"`

	// own are the sections of the commands' own types (Section.New), by
	// key, each decoded and defaulted at load (Typed.Of reads one).
	own map[string]any
	// typeErrs are the decoder's type errors in this repository's own
	// fields and sections ("line 9: cannot unmarshal …"), kept for Parse
	// to report with their key paths: a custom decoder's error would make
	// the YAML decoder drop the repository from the list, and so renumber
	// the ones after it in every later problem.
	typeErrs []string
}

// SweepsOnMain reports whether a push to the default branch sweeps.
func (r *Repo) SweepsOnMain() bool { return r.MainSweeps == nil || *r.MainSweeps }

// DefaultStageReportTimeout is how long the staging side has to report a
// request when the configuration does not say.
const DefaultStageReportTimeout = 6 * time.Hour

// DefaultProtectedPaths are the paths a run's PR may not have changed when
// the configuration does not say.
var DefaultProtectedPaths = []string{".github/**"}

// Access is who may run a command: a minimum role, or a listed user or team.
type Access struct {
	MinRole    string   `yaml:"min_role"`
	AllowUsers []string `yaml:"allow_users"`
	AllowTeams []string `yaml:"allow_teams"`
}

// External configures /approve-sweep, the sweep of a PR from a fork: its
// defaults and checks are the command's (commands/approve's
// ConfigSection).
type External struct {
	Access `yaml:",inline"`
	// Workflow is the trusted workflow (.github/workflows/FILE) opsbot
	// dispatches on the default branch for an approved head; "" turns
	// /approve-sweep off.
	Workflow string `yaml:"workflow"`
	// RunTimeout is how long an approval waits for its run to finish.
	RunTimeout time.Duration `yaml:"run_timeout"`
}

// Reuse configures /reuse-sweep-run.
type Reuse struct {
	Access             `yaml:",inline"`
	AllowPartialPinned bool `yaml:"allow_partial_pinned"`
	// MinCoverage is the least share of a run's jobs (those that ran)
	// that must have succeeded for it to be pinned or used (0: no floor).
	MinCoverage  float64  `yaml:"min_coverage"`
	AllowedPaths []string `yaml:"allowed_paths"`
	// FullSweepLabels say a PR's sweep is a full one: a PR needs one of them
	// (matched case-insensitively, as GitHub names labels) for its runs to be
	// pinned and for its pushes to be gated. Absent: DefaultFullSweepLabels;
	// an empty list turns the rule off.
	FullSweepLabels []string `yaml:"full_sweep_labels"`
	// IncompatibleLabels make a PR's sweep partial: a PR with any of them
	// cannot pin a run, its pushes are not gated, and its merge reuses
	// nothing. Absent: DefaultIncompatibleLabels; an empty list turns the
	// rule off.
	IncompatibleLabels []string `yaml:"incompatible_labels"`
}

// DefaultFullSweepLabels are the labels of a full sweep when the
// configuration does not say: the repository's workflow runs its gate only
// for a PR with one of them.
var DefaultFullSweepLabels = []string{"full-sweep-fail-fast", "full-sweep-enabled", "non-canary-full-sweep-enabled", "full-sweep-fail-fast-no-canary"}

// DefaultIncompatibleLabels make a sweep partial when the configuration
// does not say: runs of such PRs are not reused.
var DefaultIncompatibleLabels = []string{"evals-only", "agentx-fast"}

// LabelVerdict is what a PR's labels and draft flag say of its sweep under
// a repository's reuse rules. Its zero value is a gated, full sweep.
type LabelVerdict struct {
	// Draft is a draft PR: the workflow does not gate its pushes.
	Draft bool
	// Incompatible are the PR's labels that make its sweep partial.
	Incompatible []string
	// NoFullSweep is set when the PR has none of FullSweep, which the rule requires.
	NoFullSweep bool
	FullSweep   []string
}

// Judge judges a PR's labels and draft flag by the reuse rules. The draft
// flag counts only for gating (Gated); the labels decide whether the PR's
// sweep is a full one that may be reused (Full).
func (r *Reuse) Judge(labels []string, draft bool) LabelVerdict {
	v := LabelVerdict{Draft: draft}
	has := func(want string) bool {
		for _, l := range labels {
			if strings.EqualFold(l, want) {
				return true
			}
		}
		return false
	}
	for _, l := range r.IncompatibleLabels {
		if has(l) {
			v.Incompatible = append(v.Incompatible, l)
		}
	}
	if len(r.FullSweepLabels) > 0 {
		v.NoFullSweep = true
		for _, l := range r.FullSweepLabels {
			if has(l) {
				v.NoFullSweep = false
				break
			}
		}
		if v.NoFullSweep {
			v.FullSweep = r.FullSweepLabels
		}
	}
	return v
}

// Full reports whether the labels make the PR's sweep a full one.
func (v LabelVerdict) Full() bool { return len(v.Incompatible) == 0 && !v.NoFullSweep }

// Gated reports whether the repository's workflow gates the PR's pushes:
// a full sweep's labels on a PR that is not a draft.
func (v LabelVerdict) Gated() bool { return v.Full() && !v.Draft }

// Stage configures /stage-results.
type Stage struct {
	Access            `yaml:",inline"`
	Dispatch          Dispatch `yaml:"dispatch"`
	URLTemplate       string   `yaml:"url_template"`
	RequiredArtifacts []string `yaml:"required_artifacts"`
	RequiredLabels    []string `yaml:"required_labels"`
	Slot              string   `yaml:"slot"`
	// ReportTimeout is how long the staging side has to report a request
	// (started or completed) before opsbot marks it failed and says so
	// (absent: DefaultStageReportTimeout).
	ReportTimeout time.Duration `yaml:"report_timeout"`
	// CallbackSenders are the accounts (logins, bound to their ids as
	// allow_users are, or numeric ids) whose repository_dispatch reports of
	// staging are taken; empty takes any sender that echoes the request's
	// token.
	CallbackSenders []string `yaml:"callback_senders"`
}

// Dispatch is the repository_dispatch that asks the staging side to stage a run.
type Dispatch struct {
	Repo      string `yaml:"repo"`
	EventType string `yaml:"event_type"`
}

// StageURLData is what a stage url_template can use.
type StageURLData struct {
	RunID   int64
	RunDate string
	PR      int
	Repo    string
}

func checkURLTemplate(s string) error {
	t, err := template.New("url").Option("missingkey=error").Parse(s)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, StageURLData{RunID: 1, RunDate: "2026-01-01", PR: 1, Repo: "o/r"}); err != nil {
		return fmt.Errorf("uses a field it does not have (.RunID, .RunDate, .PR, .Repo): %v", err)
	}
	return nil
}

// Repo returns the configuration of the named repository (case-insensitive).
func (c *Config) Repo(name string) (*Repo, bool) {
	for i := range c.Repos {
		if strings.EqualFold(c.Repos[i].Name, name) {
			return &c.Repos[i], true
		}
	}
	return nil, false
}

// SlackChannelFor is the channel a repository's notices go to.
func (c *Config) SlackChannelFor(r *Repo) string {
	if r != nil && r.SlackChannel != "" {
		return r.SlackChannel
	}
	return c.Slack.Channel
}

// AllowUsers is every login an allow_users of the repository lists (in
// every section, the commands' own included) and its
// stage.callback_senders name, once each: the logins bound to account ids.
func (r *Repo) AllowUsers() []string {
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		if k := strings.ToLower(u); !seen[k] {
			seen[k] = true
			out = append(out, u)
		}
	}
	for _, at := range r.accesses("") {
		for _, u := range at.a.AllowUsers {
			add(u)
		}
	}
	for _, u := range r.Stage.CallbackSenders {
		if _, err := strconv.ParseInt(u, 10, 64); err != nil {
			add(u) // a login, bound to its account id; an id needs no binding
		}
	}
	return out
}

// IsGateAction reports whether a pull_request action decides the sweep for the repository.
func (r *Repo) IsGateAction(action string) bool {
	for _, a := range r.GateActions {
		if a == action {
			return true
		}
	}
	return false
}
