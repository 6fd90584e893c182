// Package stage handles /stage-results: it validates the run, acknowledges
// at once, asks the staging side with a repository_dispatch, keeps every
// request in order in bbolt, and edits the acknowledgement as the staging
// side reports back (repository_dispatch stage-results-started/completed).
package stage

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"text/template"

	"github.com/google/go-github/v62/github"

	"opsbot/auth"
	"opsbot/commands"
	"opsbot/config"
	"opsbot/ghclient"
	"opsbot/mdtext"
	"opsbot/notices"
	"opsbot/runs"
	"opsbot/state"
)

// Reader is what staging reads from GitHub besides the run: the PR's labels.
type Reader interface {
	LabelEvents(ctx context.Context, repo string, n int) ([]ghclient.LabelEvent, error)
}

// Handler is the staging side of opsbot.
type Handler struct {
	Cfg *config.Live
	// Validators gives the run validator of an installation (the one the
	// gate and commands use); Clients its reader of label timelines.
	Validators func(installation int64) (*runs.Validator, error)
	Clients    func(installation int64) (Reader, error)
	Notices    *notices.Builder
	Staged     func(repo string, runID int64) (*state.StageRequest, error)
	Log        *slog.Logger
	// Users holds the account ids the logins of stage.callback_senders
	// are bound to.
	Users *auth.Directory
}

// senderListed reports whether a report's sender is one of the
// repository's stage.callback_senders (by account id), or the list is empty.
func (h *Handler) senderListed(rc *config.Repo, id int64) bool {
	if len(rc.Stage.CallbackSenders) == 0 {
		return true
	}
	var logins []string
	for _, s := range rc.Stage.CallbackSenders {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n == id && id != 0 {
				return true
			}
			continue
		}
		logins = append(logins, s)
	}
	return id != 0 && h.Users != nil && slices.Contains(h.Users.IDs(logins), id)
}

// Enabled reports whether a repository has a staging dispatch configured.
func (h *Handler) Enabled(repo string) bool {
	rc, ok := h.Cfg.Get().Repo(repo)
	return ok && rc.Stage.Dispatch.Repo != ""
}

// Prepare validates a request; the write records it, acknowledges it and
// dispatches it.
func (h *Handler) Prepare(ctx context.Context, c commands.Comment, cmd commands.Command, v auth.Verdict) (string, bool, func(*state.Tx) error) {
	rc, _ := h.Cfg.Get().Repo(c.Repo)
	what := fmt.Sprintf("run %d", cmd.RunID)
	if cmd.RunID == 0 {
		what = "a run"
	}
	val, err := h.Validators(c.Installation)
	if err != nil {
		return fmt.Sprintf("%s I cannot stage %s: %s.", mdtext.Mention(c.Actor.Login), what, mdtext.Text(err.Error())), false, nil
	}
	gh, err := h.Clients(c.Installation)
	if err != nil {
		return fmt.Sprintf("%s I cannot stage %s: %s.", mdtext.Mention(c.Actor.Login), what, mdtext.Text(err.Error())), false, nil
	}
	var run runs.Run
	if cmd.RunID != 0 {
		rules := runs.RulesFor(rc, runs.ForStage)
		rules.Attempt = cmd.Attempt // a named attempt must still be the run's latest, the one staged
		run, err = val.Validate(ctx, rules, c.PR, cmd.RunID)
	} else {
		run, err = val.Newest(ctx, runs.RulesFor(rc, runs.ForStage), c.PR)
	}
	if err == nil && len(rc.Stage.RequiredLabels) > 0 {
		err = h.checkLabels(ctx, gh, rc, c.PR, run)
	}
	if rej, ok := runs.IsRejection(err); ok {
		reason := rej.Reason
		if cmd.RunID == 0 && rej.Rule == runs.RuleNoRun {
			reason = fmt.Sprintf("no run of PR #%d can be staged (a completed sweep run with %s and result artifacts); name one with `/stage-results <run-id>`",
				c.PR, mdtext.Code(rc.Stage.RequiredArtifacts[0]))
		}
		return fmt.Sprintf("%s I did not stage %s: %s.", mdtext.Mention(c.Actor.Login), what, reason), false, nil
	}
	if err != nil {
		h.Log.Warn("checking a run to stage failed", "run", cmd.RunID, "err", err)
		return commands.NoAnswerReply(c.Actor.Login, "stage", what), false, nil
	}
	if staged, err := h.Staged(rc.Name, run.ID); err == nil && staged != nil {
		return fmt.Sprintf("%s run %d is already staged: %s", mdtext.Mention(c.Actor.Login), run.ID, stagedURL(staged.URL)), true, nil
	}
	req := &state.StageRequest{Repo: rc.Name, PR: c.PR, RunID: run.ID, RunAttempt: max(run.Attempt, 1),
		RunDate: run.CreatedAt.UTC().Format("2006-01-02"), RunSHA: run.HeadSHA, Conclusion: run.Conclusion,
		Requester: c.Actor.Login, RequesterID: c.Actor.ID, CommentID: c.CommentID, CommentURL: c.URL,
		Installation: c.Installation, State: state.StageRequested, Token: rand.Text(), CommandLine: cmd.Text}
	return "", true, func(tx *state.Tx) error { return h.record(tx, rc, req, run) }
}

func (h *Handler) record(tx *state.Tx, rc *config.Repo, req *state.StageRequest, run runs.Run) error {
	if existing, err := tx.StageRequestByComment(req.Repo, req.CommentID); err != nil || existing != nil {
		return err
	}
	links := notices.Links{PR: h.Notices.Web.PR(req.Repo, req.PR), Comment: req.CommentURL, Run: run.URL}
	ack, err := h.Notices.Comment(tx, req.Repo, req.PR, req.Installation, notices.KindStage, AckText(req, run.URL), links)
	if err != nil {
		return err
	}
	req.AckNotice = ack
	// With a shared slot, requests still waiting are replaced by this one; each is told.
	if rc.Stage.Slot == "shared" {
		queue, err := tx.StageRequests(req.Repo)
		if err != nil {
			return err
		}
		for i := range queue {
			old := &queue[i]
			if !old.Pending() {
				continue
			}
			old.State = state.StageReplaced
			if err := tx.PutStageRequest(old); err != nil {
				return err
			}
			if err := h.Notices.Edit(tx, old.Repo, old.PR, old.Installation, old.AckNotice, notices.KindStage,
				fmt.Sprintf("%s staging run %d was replaced by a newer request (run %d of PR #%d) for the shared staging slot.",
					mdtext.Mention(old.Requester), old.RunID, req.RunID, req.PR), notices.Links{PR: h.Notices.Web.PR(old.Repo, old.PR), Comment: old.CommentURL}); err != nil {
				return err
			}
			if err := tx.Audit(state.AuditRecord{Kind: "stage", Outcome: state.StageReplaced, Repo: old.Repo, PR: old.PR, RunID: old.RunID,
				ActorLogin: old.Requester, CommentID: old.CommentID, CommentURL: old.CommentURL,
				Reason: fmt.Sprintf("replaced by run %d of PR #%d", req.RunID, req.PR)}); err != nil {
				return err
			}
		}
	}
	payload := map[string]any{
		"source-repository": req.Repo, "pr-number": strconv.Itoa(req.PR), "run-id": strconv.FormatInt(req.RunID, 10),
		"run-attempt": strconv.Itoa(req.RunAttempt), "run-date": req.RunDate, "requested-by": req.Requester,
		"comment-id": strconv.FormatInt(req.CommentID, 10), "request-token": req.Token,
	}
	// The dispatch's notice is kept with the request: deleting the comment
	// before it is sent withdraws it.
	if req.DispatchNotice, err = h.Notices.Dispatch(tx, req.Repo, req.PR, req.Installation, rc.Stage.Dispatch.Repo,
		rc.Stage.Dispatch.EventType, payload); err != nil {
		return err
	}
	if err := tx.AddStageRequest(req); err != nil {
		return err
	}
	return tx.Audit(state.AuditRecord{Kind: "stage", Outcome: state.StageRequested, Repo: req.Repo, PR: req.PR, HeadSHA: req.RunSHA,
		RunID: req.RunID, ActorID: req.RequesterID, ActorLogin: req.Requester, CommentID: req.CommentID, CommentURL: req.CommentURL,
		Reason: "dispatched " + rc.Stage.Dispatch.EventType + " to " + rc.Stage.Dispatch.Repo})
}

// AckText is the immediate reply to a stage request.
func AckText(r *state.StageRequest, runURL string) string {
	return fmt.Sprintf("%s staging run %s (%s, commit %s, %s) … I will edit this comment when the staging site has it.",
		mdtext.Mention(r.Requester), runLink(r.RunID, runURL), mdtext.Code(r.Conclusion), mdtext.Code(mdtext.ShortSHA(r.RunSHA)),
		mdtext.Text(r.RunDate))
}

func runLink(id int64, url string) string { return mdtext.Link(strconv.FormatInt(id, 10), url) }

// stagedURL links a staging URL (made from the configured template), or
// shows it as text when it is not an http(s) URL.
func stagedURL(u string) string { return mdtext.Link(mdtext.Code(u), u) }

// checkLabels requires one of the configured labels to have been on the PR
// when the run was created, from the PR's label timeline.
func (h *Handler) checkLabels(ctx context.Context, gh Reader, rc *config.Repo, pr int, run runs.Run) error {
	evs, err := gh.LabelEvents(ctx, rc.Name, pr)
	if err != nil {
		return err
	}
	on := map[string]bool{}
	for _, e := range evs {
		if e.At.After(run.CreatedAt) {
			break
		}
		on[e.Label] = e.Added
	}
	for _, l := range rc.Stage.RequiredLabels {
		if on[l] {
			return nil
		}
	}
	return &runs.Rejection{Rule: "labels", Reason: fmt.Sprintf("run %d was created when the PR had none of the labels %s", run.ID,
		mdtext.CodeList(rc.Stage.RequiredLabels))}
}

// Callback handles the staging side's report (a repository_dispatch on the
// served repository): it edits the acknowledgement in place. A report must
// echo the request's token (client_payload request-token), which only the
// dispatch to the staging side carried: anyone else able to send a
// repository_dispatch to the served repository cannot forge one.
func (h *Handler) Callback(ctx context.Context, d *state.Delivery, ev *github.RepositoryDispatchEvent) (string, state.Write, error) {
	rc, ok := h.Cfg.Get().Repo(d.Repo)
	if !ok {
		return "ignored-repo", nil, nil
	}
	p := payloadOf(ev)
	commentID, _ := strconv.ParseInt(p["comment-id"], 10, 64)
	runID, _ := strconv.ParseInt(p["run-id"], 10, 64)
	appRun, _ := strconv.ParseInt(p["app-run-id"], 10, 64)
	pr, _ := strconv.Atoi(p["pr-number"])
	succeeded := p["stage-succeeded"] == "true"
	action := ev.GetAction()
	sender := ev.GetSender()
	if !h.senderListed(rc, sender.GetID()) {
		reason := fmt.Sprintf("%s for comment %d and run %d came from @%s (account %d), who is not in stage.callback_senders", action,
			commentID, runID, sender.GetLogin(), sender.GetID())
		h.Log.Warn("stage callback refused", "reason", reason)
		return "stage-callback-refused", func(tx *state.Tx) error {
			return tx.Audit(state.AuditRecord{Kind: "callback", Outcome: "refused", Repo: rc.Name, PR: pr, RunID: runID,
				CommentID: commentID, ActorID: sender.GetID(), ActorLogin: sender.GetLogin(), Reason: reason})
		}, nil
	}
	return "stage-callback", func(tx *state.Tx) error {
		req, err := tx.StageRequestByComment(rc.Name, commentID)
		if err != nil {
			return err
		}
		matches := req != nil && req.RunID == runID && req.Pending() && (action == "stage-results-started" || action == "stage-results-completed")
		if matches && (req.Token == "" || subtle.ConstantTimeCompare([]byte(req.Token), []byte(p["request-token"])) != 1) {
			reason := fmt.Sprintf("%s for comment %d and run %d does not carry the request's token (client_payload request-token)", action, commentID, runID)
			h.Log.Warn("stage callback refused", "reason", reason, "sender", ev.GetSender().GetLogin())
			return tx.Audit(state.AuditRecord{Kind: "callback", Outcome: "refused", Repo: rc.Name, PR: pr, RunID: runID,
				CommentID: commentID, ActorID: ev.GetSender().GetID(), ActorLogin: ev.GetSender().GetLogin(), Reason: reason})
		}
		if !matches {
			reason := fmt.Sprintf("%s for comment %d and run %d matches no pending stage request", action, commentID, runID)
			h.Log.Warn("stage callback refused", "reason", reason)
			return tx.Audit(state.AuditRecord{Kind: "callback", Outcome: "refused", Repo: rc.Name, PR: pr, RunID: runID,
				CommentID: commentID, ActorLogin: ev.GetSender().GetLogin(), Reason: reason})
		}
		links := notices.Links{PR: h.Notices.Web.PR(req.Repo, req.PR), Comment: req.CommentURL, Run: h.Notices.Web.Run(req.Repo, req.RunID)}
		req.AppRunID = appRun
		var text string
		switch {
		case action == "stage-results-started":
			req.State = state.StageStarted
			text = fmt.Sprintf("%s staging run %s … staging in progress%s.", mdtext.Mention(req.Requester),
				runLink(req.RunID, h.Notices.Web.Run(req.Repo, req.RunID)), h.appRunLink(rc, appRun))
		case succeeded:
			url, err := StageURL(rc, req)
			if err != nil {
				return err
			}
			req.State, req.URL = state.StageStaged, url
			text = fmt.Sprintf("%s staged run %s: %s", mdtext.Mention(req.Requester), runLink(req.RunID, h.Notices.Web.Run(req.Repo, req.RunID)),
				stagedURL(url))
			if rc.Stage.Slot == "shared" {
				text += "\n\nThis shared staging slot stays with this run until the next `/stage-results` request."
				if err := h.unstagePrevious(tx, rc, req); err != nil {
					return err
				}
				if err := tx.SetSlotHolder(req); err != nil {
					return err
				}
			}
		default:
			req.State = state.StageFailed
			text = fmt.Sprintf("%s staging run %s failed%s.", mdtext.Mention(req.Requester), runLink(req.RunID, h.Notices.Web.Run(req.Repo, req.RunID)),
				h.appRunLink(rc, appRun))
		}
		if err := tx.PutStageRequest(req); err != nil {
			return err
		}
		if err := h.Notices.Edit(tx, req.Repo, req.PR, req.Installation, req.AckNotice, notices.KindStage, text, links); err != nil {
			return err
		}
		return tx.Audit(state.AuditRecord{Kind: "callback", Outcome: req.State, Repo: req.Repo, PR: req.PR, RunID: req.RunID,
			ActorLogin: req.Requester, CommentID: req.CommentID, CommentURL: req.CommentURL, Reason: req.URL})
	}, nil
}

func (h *Handler) unstagePrevious(tx *state.Tx, rc *config.Repo, req *state.StageRequest) error {
	prev, err := tx.SlotHolder(rc.Name)
	if err != nil || prev == nil || prev.Seq == req.Seq || prev.State != state.StageStaged {
		return err
	}
	prev.State = state.StageUnstaged
	if err := tx.PutStageRequest(prev); err != nil {
		return err
	}
	if _, err := h.Notices.Comment(tx, prev.Repo, prev.PR, prev.Installation, notices.KindStage,
		fmt.Sprintf("Run %d of this PR is no longer staged: run %d of PR #%d took the shared staging slot. Comment `/stage-results` to stage it again.",
			prev.RunID, req.RunID, req.PR), notices.Links{PR: h.Notices.Web.PR(prev.Repo, prev.PR)}); err != nil {
		return err
	}
	return tx.Audit(state.AuditRecord{Kind: "stage", Outcome: state.StageUnstaged, Repo: prev.Repo, PR: prev.PR, RunID: prev.RunID,
		ActorLogin: prev.Requester, Reason: fmt.Sprintf("run %d of PR #%d took the shared slot", req.RunID, req.PR)})
}

// StageURL is the staging URL of a request, from the repository's template.
func StageURL(rc *config.Repo, r *state.StageRequest) (string, error) {
	if rc.Stage.URLTemplate == "" {
		return "(no url_template configured)", nil
	}
	t, err := template.New("url").Option("missingkey=error").Parse(rc.Stage.URLTemplate)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, config.StageURLData{RunID: r.RunID, RunDate: r.RunDate, PR: r.PR, Repo: r.Repo}); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (h *Handler) appRunLink(rc *config.Repo, id int64) string {
	if id == 0 {
		return ""
	}
	return " (" + mdtext.Link("staging run", h.Notices.Web.Run(rc.Stage.Dispatch.Repo, id)) + ")"
}

// payloadOf reads client_payload values as strings (they may come as numbers or booleans).
func payloadOf(ev *github.RepositoryDispatchEvent) map[string]string {
	out := map[string]string{}
	var raw map[string]any
	if len(ev.ClientPayload) > 0 {
		_ = json.Unmarshal(ev.ClientPayload, &raw) // a payload that is not an object matches no request
	}
	for k, v := range raw {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			out[k] = strconv.FormatBool(x)
		}
	}
	return out
}
