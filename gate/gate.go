// Package gate decides, for one head of one PR, whether the benchmark sweep
// may be skipped: skip when an active pin's run validates again now, else
// sweep. A decision is made once and stored; asking again returns it. Every
// error decides sweep: a sweep nobody authorized to skip is never skipped.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// ErrUnknownRepo is asked about a repository opsbot does not serve.
var ErrUnknownRepo = errors.New("gate: repository not served by this opsbot")

// Store is the state the gate reads and writes.
type Store interface {
	Decision(repo string, pr int, sha string) (*state.Decision, error)
	ActivePin(repo string, pr int) (*state.Pin, error)
	PRInfo(repo string, pr int) (*state.PRInfo, error)
	Update(w state.Write) error
}

// Validators gives the run validator for an installation.
type Validators func(installation int64) (*runs.Validator, error)

// Notifier adds the notices a decision causes (GitHub and Slack) in the
// decision's transaction.
type Notifier interface {
	// Reason is a decision's reason in words, as the audit and the API keep it.
	Reason(why record.Why) string
	Decided(tx record.Tx, d *state.Decision, pin *state.Pin, installation int64) error
	PinClosed(tx record.Tx, p *state.Pin, installation int64, why string) error
	// NotGated tells a PR with an active pin that a push was not gated.
	NotGated(tx record.Tx, d *state.Decision, pin *state.Pin, installation int64) error
}

// Gate makes decisions.
type Gate struct {
	Cfg        *config.Live
	Store      Store
	Validators Validators
	Notifier   Notifier
	Log        *slog.Logger
	// Observe counts decisions (metrics); optional.
	Observe func(decision string)
	// Saved is told the runner and GPU seconds each skip saved (metrics);
	// optional.
	Saved func(repo string, runnerSeconds, gpuSeconds int64)
}

// reason is a decision's reason in words; without a notifier, its code.
func (g *Gate) reason(why record.Why) string {
	if g.Notifier == nil {
		return string(why.Code)
	}
	return g.Notifier.Reason(why)
}

// Ask is one request for a decision.
type Ask struct {
	Repo         string
	PR           int
	SHA          string
	Action       string // the pull_request action
	Source       string // webhook or api
	DeliveryID   string
	Installation int64
	// Labels and Draft are the PR's labels and draft flag when the asker
	// knows them (LabelsKnown): a push that the repository's workflow does
	// not gate (a draft, a PR without a full sweep's labels) is decided
	// nothing and uses up no pin.
	Labels      []string
	Draft       bool
	LabelsKnown bool
}

// NotGated reports whether d is the answer for a push that the
// repository's workflow does not gate: nothing was decided or stored.
func NotGated(d *state.Decision) bool { return d != nil && d.Why.Code == state.ReasonNotGated }

// Decide returns the decision for a head, making and storing it on the
// first ask of a gate action. Asks for other actions answer sweep and change
// nothing, whatever is stored for the head (a label event restarts the
// sweep). A head not yet decided whose push the repository's workflow does
// not gate (a draft, the PR's labels; NotGated) is answered sweep, decides
// nothing and keeps the pin; it stays not gated, so the webhook and the
// workflow's ask never answer one head two ways.
func (g *Gate) Decide(ctx context.Context, a Ask) (*state.Decision, error) {
	rc, ok := g.Cfg.Get().Repo(a.Repo)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRepo, a.Repo)
	}
	a.Repo = rc.Name
	if !rc.IsGateAction(a.Action) {
		return g.unstored(a, state.Why{Code: state.ReasonNotGateAction, Action: a.Action, GateActions: rc.GateActions}), nil
	}
	if d, err := g.Store.Decision(a.Repo, a.PR, a.SHA); err != nil || d != nil {
		return Effective(d), err
	}
	if d, err := g.notGated(ctx, rc, a); err != nil || d != nil {
		return d, err
	}
	pin, err := g.Store.ActivePin(a.Repo, a.PR)
	if err != nil {
		return nil, err
	}
	p := g.plan(ctx, rc, a, pin)
	return g.commit(a, p)
}

// notGated is the answer for a push the repository's workflow does not
// gate (nil when it is gated): a head answered so before stays so; else
// the ask's labels judge it, read from GitHub when the ask does not carry
// them. A head found not gated is recorded as such.
func (g *Gate) notGated(ctx context.Context, rc *config.Repo, a Ask) (*state.Decision, error) {
	info, err := g.Store.PRInfo(a.Repo, a.PR)
	if err != nil {
		return nil, err
	}
	if info != nil && info.NotGatedHead != "" && strings.EqualFold(info.NotGatedHead, a.SHA) {
		return g.unstored(a, state.Why{Code: state.ReasonNotGated, Detail: info.NotGatedWhy, SHA: a.SHA, PR: a.PR}), nil
	}
	if !a.LabelsKnown {
		v, err := g.Validators(a.Installation)
		if err != nil {
			return nil, err
		}
		pr, err := v.GH.PullRequest(ctx, a.Repo, a.PR)
		if err != nil {
			return nil, fmt.Errorf("reading the labels of PR #%d: %w", a.PR, err)
		}
		a.Labels, a.Draft, a.LabelsKnown = runs.PRLabels(pr), pr.GetDraft(), true
	}
	why := runs.NotGated(rc.Reuse.Judge(a.Labels, a.Draft))
	if why == "" {
		return nil, nil
	}
	err = g.Store.Update(func(tx *state.Tx) error {
		info, err := tx.PRInfo(a.Repo, a.PR)
		if err != nil || info == nil {
			return err
		}
		info.NotGatedHead, info.NotGatedWhy = a.SHA, why
		return tx.PutPRInfo(info)
	})
	if err != nil {
		return nil, err
	}
	return g.unstored(a, state.Why{Code: state.ReasonNotGated, Detail: why, SHA: a.SHA, PR: a.PR}), nil
}

// unstored is a sweep answer that decides nothing.
func (g *Gate) unstored(a Ask, why state.Why) *state.Decision {
	return &state.Decision{Repo: a.Repo, PR: a.PR, HeadSHA: a.SHA, Decision: state.Sweep, Action: a.Action, Source: a.Source,
		Reason: g.reason(why), Why: why}
}

type plan struct {
	decision state.Verdict
	why      state.Why
	pin      *state.Pin // the pin looked at, if any
	run      runs.Run
	pinState state.PinState // what the pin becomes: consumed, invalid, or "" (unchanged)
	merge    bool           // the head is the PR's merge commit
}

func (g *Gate) plan(ctx context.Context, rc *config.Repo, a Ask, pin *state.Pin) plan {
	if pin == nil {
		return plan{decision: state.Sweep, why: state.Why{Code: state.ReasonNoPin}}
	}
	if strings.EqualFold(pin.PRHeadAtGrant, a.SHA) {
		return plan{decision: state.Sweep, pin: pin, why: state.Why{Code: state.ReasonPinnedAtHead, RunID: pin.RunID}}
	}
	v, err := g.Validators(a.Installation)
	if err != nil {
		return plan{decision: state.Sweep, pin: pin, pinState: state.PinInvalid,
			why: state.Why{Code: state.ReasonUncheckable, RunID: pin.RunID, Detail: detail(err)}}
	}
	if pin.ExpectParent != "" {
		// A merge's pin covers only the branch update the merge asked for:
		// GitHub's merge of the base's tip then into the head it read, by
		// its content (the tree of GitHub's own merge of the two, recorded
		// before the update was asked), not by who signed it: anyone who
		// can push to the branch can have GitHub sign a commit with those
		// parents and any tree (the Git database API with an App's token).
		notIt := func(why string) plan {
			return plan{decision: state.Sweep, pin: pin, pinState: state.PinInvalid,
				why: state.Why{Code: state.ReasonRunRejected, RunID: pin.RunID, Detail: fmt.Sprintf("the push %s is not the branch update "+
					"/merge-with-reuse asked for, the only push its pin covers: %s", mdtext.ShortSHA(a.SHA), why)}}
		}
		if pin.ExpectBase == "" {
			return notIt("the merge had asked for no update (the branch was up to date)")
		}
		if pin.ExpectCommit != "" {
			// The merge opsbot made itself (a conflict merged on GitHub's
			// side): that commit, by its SHA, which fixes its parents and the
			// tree opsbot checked, whoever GitHub names its committer.
			if !strings.EqualFold(a.SHA, pin.ExpectCommit) {
				return notIt(fmt.Sprintf("it is not the merge opsbot made (%s)", mdtext.ShortSHA(pin.ExpectCommit)))
			}
			return g.planRun(ctx, rc, a, pin, v)
		}
		cm, err := v.GH.CommitInfo(ctx, a.Repo, a.SHA)
		if err != nil {
			g.Log.Warn("reading a pushed commit failed; deciding sweep, keeping the pin", "repo", a.Repo, "pr", a.PR, "err", err)
			return plan{decision: state.Sweep, pin: pin,
				why: state.Why{Code: state.ReasonGitHubErrorKept, RunID: pin.RunID, Detail: detail(err), Actor: pin.ActorLogin}}
		}
		switch {
		case len(cm.Parents) != 2 || !strings.EqualFold(cm.Parents[0], pin.ExpectParent) || !strings.EqualFold(cm.Parents[1], pin.ExpectBase):
			return notIt(fmt.Sprintf("it is not a merge of the base's tip %s into %s", mdtext.ShortSHA(pin.ExpectBase), mdtext.ShortSHA(pin.ExpectParent)))
		case pin.ExpectTree == "" || !strings.EqualFold(cm.Tree, pin.ExpectTree):
			return notIt(fmt.Sprintf("its content is not GitHub's merge of the two (tree %s, where GitHub's merge of those parents makes %s)",
				mdtext.ShortSHA(cm.Tree), mdtext.ShortSHA(pin.ExpectTree)))
		case !cm.ByGitHub:
			return notIt("GitHub did not make it (it is not signed and committed by GitHub)")
		}
	}
	return g.planRun(ctx, rc, a, pin, v)
}

// planRun checks the pinned run for the push a.
func (g *Gate) planRun(ctx context.Context, rc *config.Repo, a Ask, pin *state.Pin, v *runs.Validator) plan {
	rules := runs.RulesFor(rc, runs.ForNamedPin)
	rules.NewHead = a.SHA
	rules.Attempt = pin.RunAttempt // a re-run since the pin replaced what the maintainer saw
	// The labels were judged before (Decide: a push not gated keeps the
	// pin); a label changed since the push is the next push's to judge.
	rules.Labels = nil
	run, err := v.Validate(ctx, rules, a.PR, pin.RunID)
	if rej, ok := runs.IsRejection(err); ok {
		if run.PRHead != "" && !strings.EqualFold(run.PRHead, a.SHA) {
			// A rule failing for a commit that is not the head (a diverged
			// one, say) leaves the pin for the head, as a pass does below.
			return plan{decision: state.Sweep, pin: pin, why: state.Why{Code: state.ReasonNotHeadRejected, RunID: pin.RunID, SHA: a.SHA,
				PR: a.PR, GitHubHead: run.PRHead, Detail: rej.Reason}}
		}
		return plan{decision: state.Sweep, pin: pin, pinState: state.PinInvalid,
			why: state.Why{Code: state.ReasonRunRejected, RunID: pin.RunID, Detail: rej.Reason}}
	}
	if err != nil {
		// GitHub failing (a rate limit spent, an outage) says nothing of
		// the run: this head sweeps (fail closed) and the pin stays for
		// the next push, where the run is checked again.
		g.Log.Warn("validating a pinned run failed; deciding sweep, keeping the pin", "repo", a.Repo, "pr", a.PR, "run", pin.RunID, "err", err)
		return plan{decision: state.Sweep, pin: pin,
			why: state.Why{Code: state.ReasonGitHubErrorKept, RunID: pin.RunID, Detail: detail(err), Actor: pin.ActorLogin}}
	}
	if !strings.EqualFold(run.PRHead, a.SHA) {
		// A late or out-of-order webhook: the pin waits for the head.
		return plan{decision: state.Sweep, pin: pin, why: state.Why{Code: state.ReasonNotHead, RunID: pin.RunID, SHA: a.SHA, PR: a.PR,
			GitHubHead: run.PRHead}}
	}
	return plan{decision: state.Skip, pin: pin, run: run, pinState: state.PinConsumed,
		why: state.Why{Code: state.ReasonReuse, RunID: pin.RunID, Actor: pin.ActorLogin}}
}

// commit writes the decision planned from reads made outside the
// transaction. The write may run more than once (Store.Update), so it
// works on its own copy of the plan and decides from what it reads.
func (g *Gate) commit(a Ask, planned plan) (*state.Decision, error) {
	var out *state.Decision
	wrote := false // this call decided (a decision found stored was counted when it was made)
	err := g.Store.Update(func(tx *state.Tx) error {
		p := planned
		wrote = false
		if d, err := tx.Decision(a.Repo, a.PR, a.SHA); err != nil || d != nil {
			out = d
			return err
		}
		cur, err := tx.ActivePin(a.Repo, a.PR)
		if err != nil {
			return err
		}
		switch {
		case p.pin != nil && (cur == nil || cur.ID != p.pin.ID):
			// The pin changed while the run was checked (revoked, superseded):
			// this head sweeps and a newer pin waits for the next push.
			p = plan{decision: state.Sweep, why: state.Why{Code: state.ReasonPinChanged}, merge: p.merge}
		case p.pin == nil && cur != nil:
			// A pin recorded after this decision began covers the next push.
			p.why = state.Why{Code: state.ReasonNoPinWhenDecided}
		}
		d := &state.Decision{Repo: a.Repo, PR: a.PR, HeadSHA: a.SHA, Decision: p.decision, Reason: g.reason(p.why), Why: p.why,
			Action: a.Action, Source: a.Source, DeliveryID: a.DeliveryID, MergeOf: p.merge}
		if p.decision == state.Skip {
			d.PinID, d.RunID, d.RunAttempt, d.RunURL, d.RunSHA = p.pin.ID, p.run.ID, p.run.Attempt, p.run.URL, p.run.HeadSHA
			d.ActorID, d.ActorLogin, d.CommentURL = p.pin.ActorID, p.pin.ActorLogin, p.pin.CommentURL
			if c := p.run.Coverage; c != nil {
				d.RunnerSeconds, d.GPUSeconds = c.RunnerSeconds, c.GPUSeconds
				d.Jobs, d.JobsSucceeded = c.Jobs, c.Succeeded
			}
		} else if p.pin != nil {
			d.PinID, d.RunID = p.pin.ID, p.pin.RunID
		}
		if err := tx.PutDecision(d); err != nil {
			return err
		}
		wrote = true
		if !p.merge {
			// A gated push: a later push that is not gated is told again.
			if info, err := tx.PRInfo(a.Repo, a.PR); err != nil {
				return err
			} else if info != nil && info.NotGatedSaid != "" {
				info.NotGatedSaid = ""
				if err := tx.PutPRInfo(info); err != nil {
					return err
				}
			}
		}
		rec := state.AuditRecord{Kind: "decision", Outcome: string(d.Decision), DeliveryID: a.DeliveryID, Repo: a.Repo, PR: a.PR,
			HeadSHA: a.SHA, RunID: d.RunID, PinID: d.PinID, ActorID: d.ActorID, ActorLogin: d.ActorLogin, Reason: d.Reason, RunnerSeconds: d.RunnerSeconds, GPUSeconds: d.GPUSeconds, OriginRef: record.OriginRef{CommentURL: d.CommentURL}}
		if c := p.run.Coverage; p.decision == state.Skip && c != nil {
			rec.Jobs, rec.JobsSucceeded = c.Jobs, c.Succeeded
		}
		if err := tx.Audit(rec); err != nil {
			return err
		}
		var closed *state.Pin
		if p.pinState != "" && p.pin != nil {
			closed = cur
			why := d.Reason
			if p.pinState == state.PinConsumed {
				why = "consumed by " + a.SHA
			}
			if err := tx.Transition(closed, p.pinState, state.PinChange{Reason: why, HeadSHA: a.SHA, DeliveryID: a.DeliveryID,
				ActorID: closed.ActorID, ActorLogin: closed.ActorLogin, OriginRef: closed.OriginRef}); err != nil {
				return err
			}
		}
		out = d
		if g.Notifier != nil {
			return g.Notifier.Decided(tx, d, closed, a.Installation)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if g.Observe != nil {
		g.Observe(string(out.Decision))
	}
	if g.Saved != nil && wrote && out.Decision == state.Skip {
		g.Saved(out.Repo, out.RunnerSeconds, out.GPUSeconds)
	}
	return out, nil
}

// NotGatedPush records a push the repository's workflow does not gate (d
// is Decide's unstored answer) in the delivery's transaction: the audit
// says why, and a PR with an active pin is told once per reason that the
// pin stays for the next gated push.
func (g *Gate) NotGatedPush(tx *state.Tx, d *state.Decision, installation int64, deliveryID string) error {
	if err := tx.Audit(state.AuditRecord{Kind: record.AuditDecision, Outcome: string(state.ReasonNotGated), DeliveryID: deliveryID,
		Repo: d.Repo, PR: d.PR, HeadSHA: d.HeadSHA, Reason: d.Reason}); err != nil {
		return err
	}
	pin, err := tx.ActivePin(d.Repo, d.PR)
	if err != nil || pin == nil {
		return err
	}
	info, err := tx.PRInfo(d.Repo, d.PR)
	said := fmt.Sprintf("pin %d: %s", pin.ID, d.Why.Detail) // a new pin, or another reason, is told again
	if err != nil || info == nil || info.NotGatedSaid == said {
		return err
	}
	info.NotGatedSaid = said
	if err := tx.PutPRInfo(info); err != nil {
		return err
	}
	if g.Notifier == nil {
		return nil
	}
	return g.Notifier.NotGated(tx, d, pin, installation)
}

// Merged consumes a PR's active pin at merge: the merge commit (a.SHA) is
// the head it covers, recorded as a decision, so a push gate on the default
// branch can name the run that stood in for the PR. The run must still
// qualify, with the path guard applied from its commit to the PR's final
// head (finalHead; "" means the PR's head as GitHub tells it now), or the
// pin becomes invalid instead. A final head that the pin would have covered
// and that was never decided (its synchronize was lost, or arrives after the
// merge) is decided now, with the same rules, and the merge then consumes
// nothing. It returns nil when the PR had no active pin.
func (g *Gate) Merged(ctx context.Context, a Ask, finalHead string) (*state.Decision, error) {
	rc, ok := g.Cfg.Get().Repo(a.Repo)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRepo, a.Repo)
	}
	a.Repo = rc.Name
	pin, err := g.Store.ActivePin(a.Repo, a.PR)
	if err != nil || pin == nil {
		return nil, err
	}
	if d, err := g.Store.Decision(a.Repo, a.PR, a.SHA); err != nil || d != nil {
		return d, err
	}
	if a.LabelsKnown {
		// The labels the merge carried: a partial sweep's merge reuses nothing.
		if rej := runs.LabelRejection(a.PR, rc.Reuse.Judge(a.Labels, false)); rej != nil {
			return g.commit(a, plan{decision: state.Sweep, pin: pin, pinState: state.PinInvalid, merge: true,
				why: state.Why{Code: state.ReasonMergeRejected, RunID: pin.RunID, Detail: rej.Reason}})
		}
	}
	info, err := g.Store.PRInfo(a.Repo, a.PR)
	if err != nil {
		return nil, err
	}
	// A final head answered not gated stays undecided: its push swept as
	// its labels said, and the merge is judged below.
	ungated := info != nil && finalHead != "" && strings.EqualFold(info.NotGatedHead, finalHead)
	if finalHead != "" && finalHead != pin.PRHeadAtGrant && !ungated {
		d, err := g.Store.Decision(a.Repo, a.PR, finalHead)
		if err != nil {
			return nil, err
		}
		if d == nil {
			head := a
			head.SHA = finalHead
			return g.commit(head, g.plan(ctx, rc, head, pin))
		}
	}
	p := plan{decision: state.Skip, pin: pin, pinState: state.PinConsumed, merge: true,
		why: state.Why{Code: state.ReasonMerged, RunID: pin.RunID, Actor: pin.ActorLogin}}
	v, err := g.Validators(a.Installation)
	if err == nil {
		rules := runs.RulesFor(rc, runs.ForNamedPin)
		rules.NewHead = finalHead // the path guard runs to the PR's final head, not into the default branch
		rules.Attempt = pin.RunAttempt
		var run runs.Run
		run, err = v.Validate(ctx, rules, a.PR, pin.RunID)
		p.run = run
	}
	if err != nil {
		p = plan{decision: state.Sweep, pin: pin, pinState: state.PinInvalid, merge: true,
			why: state.Why{Code: state.ReasonMergeRejected, RunID: pin.RunID, Detail: detail(err)}}
	}
	return g.commit(a, p)
}

// Closed expires the PR's active pin when the PR closes without merging
// (Merged handles a merge), in the close's transaction, and tells the PR
// why. The actor is who closed it. A PR without an active pin changes
// nothing.
func (g *Gate) Closed(tx *state.Tx, a Ask, actorID int64, actorLogin string) error {
	p, err := tx.ActivePin(a.Repo, a.PR)
	if err != nil || p == nil {
		return err
	}
	const why = "the PR was closed without merging"
	if err := tx.Transition(p, state.PinExpired, state.PinChange{Reason: why, ActorID: actorID, ActorLogin: actorLogin}); err != nil {
		return err
	}
	if g.Notifier == nil {
		return nil
	}
	return g.Notifier.PinClosed(tx, p, a.Installation, why)
}

// detail is an error in a reason that opsbot's comments quote as Markdown:
// a rule's refusal as written (runs quotes its names), any other error (its
// text comes from GitHub) as one code span.
func detail(err error) string {
	if rej, ok := runs.IsRejection(err); ok {
		return rej.Reason
	}
	return mdtext.Code(err.Error())
}

// Effective is a stored decision as the gate answers it now: a skip
// overridden since (Sweep anyway) is a sweep, saying who asked.
func Effective(d *state.Decision) *state.Decision {
	if d == nil || d.OverriddenBy == "" {
		return d
	}
	v := *d
	v.Decision = state.Sweep
	v.Reason = fmt.Sprintf("sweep anyway: @%s asked for this head's sweep after it was skipped", d.OverriddenBy)
	return &v
}
