package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// reuseReadiness is what the opsbot/reuse-ready status says of a PR's head
// now: whether a merge now would have a reuse source, the state and the
// words (at most 140 characters, GitHub's limit) and the page to link. (Not
// the server's readiness, /readyz, nor a PR's mergeability.)
type reuseReadiness struct {
	state, words, url string
}

// reuseReadinessOf reads the answer from what opsbot keeps: an active pin (the
// merge consumes it), the head's skip (the run it reused), the head's own
// sweep when it completed, a sweep still running, or nothing.
func reuseReadinessOf(tx *state.Tx, rc *config.Repo, info *state.PRInfo) (reuseReadiness, error) {
	if info.LabelsKnown {
		// The merge's push reuses nothing from a PR its labels make partial
		// (the push gate refuses it), pin or no pin.
		if v := rc.Reuse.Judge(info.Labels, info.Draft); !v.Full() {
			why := "its labels make its sweep partial"
			if v.NoFullSweep {
				why = "it has no full-sweep label"
			}
			return reuseReadiness{"failure", "no reuse source: " + why + ", so a merge reuses nothing", ""}, nil
		}
	}
	pin, err := tx.ActivePin(info.Repo, info.PR)
	if err != nil {
		return reuseReadiness{}, err
	}
	if pin != nil {
		return reuseReadiness{"success", fmt.Sprintf("merge will reuse run %d (authorized by @%s)", pin.RunID, pin.ActorLogin), pin.RunURL}, nil
	}
	d, err := tx.Decision(info.Repo, info.PR, info.HeadSHA)
	if err != nil {
		return reuseReadiness{}, err
	}
	if d != nil && d.Skipped() {
		return reuseReadiness{"success", fmt.Sprintf("merge will reuse run %d (authorized by @%s)", d.RunID, d.ActorLogin), d.RunURL}, nil
	}
	overridden := d != nil && d.OverriddenBy != ""
	started := info.SweepStarted // the attempt's start; a delivery without it: its completion
	if started.IsZero() {
		started = info.SweepAt
	}
	measured := !overridden || (record.SkippedHead{OverriddenAt: d.OverriddenAt}).Measured(started)
	if strings.EqualFold(info.SweepSHA, info.HeadSHA) && info.SweepRun != 0 && measured {
		if info.SweepConclusion == "success" {
			return reuseReadiness{"success", fmt.Sprintf("the head's own sweep, run %d (checked again at the merge)", info.SweepRun), info.SweepURL}, nil
		}
		return reuseReadiness{"failure", fmt.Sprintf("no reuse source: the head's sweep (run %d) concluded %s; pin a run with /reuse-sweep-run",
			info.SweepRun, info.SweepConclusion), info.SweepURL}, nil
	}
	if d != nil {
		return reuseReadiness{"pending", "the head's sweep is running; a merge waits for it", ""}, nil
	}
	return reuseReadiness{"failure", "no reuse source: a merge now ingests nothing; pin a run with /reuse-sweep-run", ""}, nil
}

// setReuseReady sets opsbot/reuse-ready on the PR's head when the answer
// changed, in the delivery's transaction: only for a repository whose
// default branch runs no sweep of its own (a merge without a reuse source
// ingests nothing there), and only for an open PR whose head opsbot knows.
func (h *Handler) setReuseReady(tx *state.Tx, rc *config.Repo, pr int) error {
	if rc.SweepsOnMain() || pr <= 0 || h.Notices == nil {
		return nil
	}
	info, err := tx.PRInfo(rc.Name, pr)
	if err != nil || info == nil || info.HeadSHA == "" || info.State == "closed" {
		return err
	}
	r, err := reuseReadinessOf(tx, rc, info)
	if err != nil {
		return err
	}
	r.words = mdtext.Clip(r.words, 140)
	said := strings.ToLower(info.HeadSHA) + " " + r.state + " " + r.words
	if info.ReadySaid == said {
		return nil
	}
	info.ReadySaid = said
	if err := tx.PutPRInfo(info); err != nil {
		return err
	}
	return h.Notices.ReadyStatus(tx, rc.Name, pr, info.Installation, info.HeadSHA, r.state, r.words, r.url)
}

// workflowRunPayload is the part of a workflow_run event opsbot reads.
type workflowRunPayload struct {
	WorkflowRun struct {
		ID           int64     `json:"id"`
		HeadSHA      string    `json:"head_sha"`
		Conclusion   string    `json:"conclusion"`
		Path         string    `json:"path"`
		Event        string    `json:"event"`
		HTMLURL      string    `json:"html_url"`
		RunAttempt   int       `json:"run_attempt"`
		UpdatedAt    time.Time `json:"updated_at"`
		RunStartedAt time.Time `json:"run_started_at"` // its latest attempt's start
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	} `json:"workflow_run"`
}

// handleWorkflowRun is a workflow run's completion on a PR's head: a run of
// the sweep workflow for the PR is the head's own sweep (opsbot/reuse-ready
// reads it); every completion wakes the PR's sequences (kind.wakes).
func (h *Handler) handleWorkflowRun(_ context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var ev workflowRunPayload
	if err := decode(d, &ev); err != nil {
		return "", nil, err
	}
	run := ev.WorkflowRun
	// path is ".github/workflows/x.yml", with "@ref" after it for a
	// reusable or dynamic workflow in newer payloads.
	path, _, _ := strings.Cut(run.Path, "@")
	listed := false
	for _, p := range run.PullRequests {
		listed = listed || p.Number == d.PR
	}
	// Only a run made for this PR is its own sweep: one that lists it (a
	// fork's run lists none, and another PR on the same commit lists its own).
	if path != rc.SweepWorkflow || run.Event != "pull_request" || !listed {
		return "woke-sequences", nil, nil
	}
	return "sweep-completed", func(tx *state.Tx) error {
		info, err := tx.PRInfo(rc.Name, d.PR)
		if err != nil || info == nil {
			return err
		}
		if strings.EqualFold(info.SweepSHA, run.HeadSHA) && !run.UpdatedAt.After(info.SweepAt) {
			return nil // an older attempt's completion, delivered late
		}
		info.SweepSHA, info.SweepRun, info.SweepConclusion, info.SweepURL = strings.ToLower(run.HeadSHA), run.ID, run.Conclusion, run.HTMLURL
		info.SweepAt, info.SweepStarted = run.UpdatedAt, run.RunStartedAt
		if err := tx.PutPRInfo(info); err != nil {
			return err
		}
		if run.Conclusion != "success" || !strings.EqualFold(run.HeadSHA, info.HeadSHA) || info.State == "closed" {
			return nil
		}
		if dec, err := tx.Decision(rc.Name, d.PR, run.HeadSHA); err != nil {
			return err
		} else if dec != nil && dec.Decision == record.Skip && !(record.SkippedHead{OverriddenAt: dec.OverriddenAt}).Measured(run.RunStartedAt) {
			// Its sweep was skipped: the run measured nothing to reuse (after
			// Sweep anyway, an attempt started before it measured nothing too).
			return nil
		}
		// One click to reuse it: the head's check run offers the run (a
		// GitHub App's), and so does the PR's Slack thread.
		actions := h.Commands.CheckActions()
		if err := h.Notices.CheckRun(tx, rc.Name, d.PR, info.Installation, run.HeadSHA, "neutral",
			fmt.Sprintf("Sweep run %d finished: it can be reused", run.ID),
			fmt.Sprintf("The sweep of this head finished: run %s. %s A click runs as the one who clicks, with its command's role check.",
				mdtext.Link(strconv.FormatInt(run.ID, 10), run.HTMLURL), notices.ActionsText(actions)),
			run.ID, actions); err != nil {
			return err
		}
		if !h.SlackButtons {
			return nil
		}
		// One click to reuse it: the PR's Slack thread offers the run, an
		// offer of its own (record.Offer).
		o := &record.Offer{Repo: rc.Name, PR: d.PR, Head: info.HeadSHA, Surface: record.OfferSlack}
		for _, b := range h.Commands.SlackButtons(run.ID, func(int64) string { return "" }) {
			o.Actions = append(o.Actions, b.ActionID)
		}
		if len(o.Actions) == 0 {
			return nil
		}
		if err := tx.OfferButtons(o); err != nil {
			return err
		}
		val := func(run int64) string {
			raw, _ := json.Marshal(ClickValue{Repo: rc.Name, PR: d.PR, RunID: run, Head: strings.ToLower(info.HeadSHA), Nonce: o.Nonce}) // plain fields: cannot fail
			return string(raw)
		}
		text := fmt.Sprintf("🏁 The sweep of %s finished: run %s.", mdtext.Code(mdtext.ShortSHA(run.HeadSHA)),
			mdtext.Link(strconv.FormatInt(run.ID, 10), run.HTMLURL))
		return h.Notices.SlackButtons(tx, rc.Name, d.PR, text, notices.Links{PR: h.Notices.Web.PR(rc.Name, d.PR), Run: run.HTMLURL},
			h.Commands.SlackButtons(run.ID, val))
	}, nil
}
