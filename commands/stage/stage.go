// Package stage is /stage-results: it validates the run, acknowledges
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
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"text/template"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Reader is what staging reads from GitHub besides the run: the PR's labels.
type Reader interface {
	LabelEvents(ctx context.Context, repo string, n int) ([]ghclient.LabelEvent, error)
}

// Validator checks runs for a PR (runs.Validator).
type Validator interface {
	Validate(ctx context.Context, r runs.Rules, pr int, runID int64) (runs.Run, error)
	Newest(ctx context.Context, r runs.Rules, pr int) (runs.Run, error)
}

// Handler is the staging side of opsbot.
type Handler struct {
	Cfg *config.Live
	// Validators gives the run validator of an installation (the one the
	// gate and commands use); Clients its reader of label timelines.
	Validators func(installation int64) (Validator, error)
	Clients    func(installation int64) (Reader, error)
	Notices    *notices.Notifier
	Staged     func(repo string, runID int64) (*record.StageRequest, error)
	Log        *slog.Logger
	// Users holds the account ids the logins of stage.callback_senders
	// are bound to (or users gives them, once opsbot has started).
	Users *auth.Directory
	users func() *auth.Directory
}

// directory is the bound logins: Users, or what users gives.
func (h *Handler) directory() *auth.Directory {
	if h.Users == nil && h.users != nil {
		return h.users()
	}
	return h.Users
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
	users := h.directory()
	return id != 0 && users != nil && slices.Contains(users.IDs(logins), id)
}

// Enabled reports whether a repository has a staging dispatch configured.
func (h *Handler) Enabled(repo string) bool {
	rc, ok := h.Cfg.Get().Repo(repo)
	return ok && rc.Stage.Dispatch.Repo != ""
}

// Name is the command's canonical name.
const Name = "stage-results"

// Usage is the command's usage text.
const Usage = "usage: /stage-results [<run-id or run URL>]"

// Spec is the command, run by h.
// Module is /stage-results and its deadlines' sequence, from what every
// command shares.
func Module(d commands.Deps) commands.Module {
	h := &Handler{Cfg: d.Cfg, Notices: d.Notices, Log: d.Log,
		Staged:     func(repo string, run int64) (*record.StageRequest, error) { return d.State.StagedRun(repo, run) },
		Validators: func(inst int64) (Validator, error) { return d.Validators(inst) },
		Clients:    func(inst int64) (Reader, error) { return d.GitHub(inst) }}
	if d.Users != nil {
		h.users = d.Users
	}
	return h.Module()
}

// Module is the command run by h.
func (h *Handler) Module() commands.Module {
	return commands.Module{Spec: Spec(h), Kinds: []seq.Kind{Kind(h)}, Reports: h}
}

func Spec(h *Handler) commands.Spec {
	return commands.Spec{
		Name:    Name,
		Verbs:   []commands.Verb{{Word: "/stage-results", Usage: Usage, Args: args, UsageNote: commands.RunNote}},
		Access:  func(rc *config.Repo) config.Access { return rc.Stage.Access },
		Help:    help,
		Handler: h,
	}
}

func args(c *commands.Command, args []string, opt commands.Options) string {
	switch len(args) {
	case 0:
		return ""
	case 1:
		var reason string
		c.RunID, c.Attempt, reason = commands.RunArgument(args[0], opt)
		return reason
	}
	return fmt.Sprintf("%s takes one argument, got %d", c.Verb, len(args))
}

func help(rc *config.Repo) commands.Help {
	who := commands.Who(rc.Stage.Access)
	h := commands.Help{Rows: []commands.HelpRow{
		{Command: "`/stage-results <run>`", What: "publish run `<run>`'s results to the staging site", Who: who},
		{Command: "`/stage-results`", What: "the same for the newest stageable sweep run of this PR", Who: who},
	}}
	if rc.Stage.Dispatch.Repo == "" {
		h.Settings = []string{"staging is not configured for this repository"}
	}
	return h
}

// Prepare validates a request; the write records it, acknowledges it and
// dispatches it.
func (h *Handler) Prepare(ctx context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	rc := env.Repo
	if rc.Stage.Dispatch.Repo == "" {
		return commands.Result{Outcome: commands.Rejected, Reason: "staging is not configured",
			Reply: fmt.Sprintf("%s staging is not configured for %s (no `stage.dispatch.repo`).", mdtext.Mention(in.Actor.Login), mdtext.Text(rc.Name))}
	}
	reply, req, run := h.prepare(ctx, env, in, line)
	if req == nil {
		if reply.ok {
			return commands.Result{Outcome: commands.Accepted, Reply: reply.text}
		}
		return commands.Result{Outcome: commands.Rejected, Reason: reply.text, Reply: reply.text}
	}
	step := h.request(env, rc, req, run)
	return commands.Result{Outcome: commands.Accepted, Acknowledges: true, Plan: plan.Plan{Steps: []plan.Step{step}}}
}

type answer struct {
	text string
	ok   bool
}

func (h *Handler) prepare(ctx context.Context, env commands.Env, in commands.Invocation, cmd commands.Line) (answer, *record.StageRequest, runs.Run) {
	rc := env.Repo
	what := fmt.Sprintf("run %d", cmd.RunID)
	if cmd.RunID == 0 {
		what = "a run"
	}
	refuse := func(text string) (answer, *record.StageRequest, runs.Run) { return answer{text: text}, nil, runs.Run{} }
	if h.Validators == nil || h.Clients == nil {
		return refuse(fmt.Sprintf("%s I cannot stage %s: staging has no GitHub client.", mdtext.Mention(in.Actor.Login), what))
	}
	val, err := h.Validators(in.Installation)
	if err != nil {
		return refuse(fmt.Sprintf("%s I cannot stage %s: %s.", mdtext.Mention(in.Actor.Login), what, mdtext.Text(err.Error())))
	}
	gh, err := h.Clients(in.Installation)
	if err != nil {
		return refuse(fmt.Sprintf("%s I cannot stage %s: %s.", mdtext.Mention(in.Actor.Login), what, mdtext.Text(err.Error())))
	}
	var run runs.Run
	if cmd.RunID != 0 {
		rules := runs.RulesFor(rc, runs.ForStage)
		rules.Attempt = cmd.Attempt // a named attempt must still be the run's latest, the one staged
		run, err = val.Validate(ctx, rules, in.PR, cmd.RunID)
	} else {
		run, err = val.Newest(ctx, runs.RulesFor(rc, runs.ForStage), in.PR)
	}
	if err == nil && len(rc.Stage.RequiredLabels) > 0 {
		err = h.checkLabels(ctx, gh, rc, in.PR, run)
	}
	if rej, ok := runs.IsRejection(err); ok {
		reason := rej.Reason
		if cmd.RunID == 0 && rej.Rule == runs.RuleNoRun {
			reason = fmt.Sprintf("no run of PR #%d can be staged (a completed sweep run with %s and result artifacts); name one with `/stage-results <run-id>`",
				in.PR, mdtext.Code(rc.Stage.RequiredArtifacts[0]))
		}
		return refuse(fmt.Sprintf("%s I did not stage %s: %s.", mdtext.Mention(in.Actor.Login), what, reason))
	}
	if err != nil {
		env.Log.Warn("checking a run to stage failed", "run", cmd.RunID, "err", err)
		return refuse(commands.NoAnswerReply(in.Actor.Login, "stage", what))
	}
	if h.Staged != nil {
		if staged, err := h.Staged(rc.Name, run.ID); err == nil && staged != nil {
			return answer{text: fmt.Sprintf("%s run %d is already staged: %s", mdtext.Mention(in.Actor.Login), run.ID, stagedURL(staged.URL)), ok: true}, nil, run
		}
	}
	req := &record.StageRequest{Repo: rc.Name, PR: in.PR, RunID: run.ID, RunAttempt: max(run.Attempt, 1),
		RunDate: run.CreatedAt.UTC().Format("2006-01-02"), RunSHA: run.HeadSHA, Conclusion: run.Conclusion,
		Requester: in.Actor.Login, RequesterID: in.Actor.ID,
		Installation: in.Installation, State: record.StageRequested, Token: rand.Text(), CommandLine: cmd.Text}
	req.SetOrigin(in.Origin)
	return answer{ok: true}, req, run
}

// ErrTakeBackUnchecked is a take-back whose actor's role GitHub could not
// tell: nothing is decided, and the delivery is tried again.
var ErrTakeBackUnchecked = errors.New("stage: the role of the account that took a stage request back could not be checked")

// TakeBack cancels the stage request ch's comment made when the comment
// was deleted or the request's line edited away, and its dispatch has not
// been sent (not even tried): the staging side never hears of it. A
// request already dispatched stays as it is, audited. The actor must be
// the requester or hold the command's role; when GitHub cannot tell the
// role, TakeBack returns ErrTakeBackUnchecked and plans nothing.
func (h *Handler) TakeBack(ctx context.Context, env commands.Env, ch commands.Change) (plan.Plan, error) {
	r, err := env.State.StageRequestByComment(ch.Repo, ch.Origin.ID)
	if err != nil {
		return plan.Plan{}, err
	}
	if r == nil {
		// Nothing to take back holds only while the comment has no request.
		return plan.Plan{Require: []plan.Fact{plan.StageRequest{Repo: ch.Repo, CommentID: ch.Origin.ID}}}, nil
	}
	if !r.Pending() || !r.Origin().Same(ch.Origin) {
		return plan.Plan{}, nil // a request that no longer waits never waits again
	}
	if !ch.Deleted && (r.CommandLine == "" || commands.HasLine(ch.Commands, r.CommandLine)) {
		return plan.Plan{}, nil
	}
	why := "its comment was deleted"
	if !ch.Deleted {
		why = "its command was edited away"
	}
	var v auth.Verdict
	if env.Repo.Stage.Dispatch.Repo != "" {
		v = env.MayTakeBack(ctx, ch, ch.Spec)
	}
	login := ch.Actor.Login
	rec := record.AuditRecord{Kind: record.AuditStage, Repo: r.Repo, PR: r.PR, RunID: r.RunID, ActorID: ch.Actor.ID, ActorLogin: login}
	rec.SetOrigin(r.Origin())
	if v.CheckFailed && r.RequesterID != ch.Actor.ID {
		// Neither withdrawn nor kept on a role nobody knows: the delivery
		// is tried again (and dead-lettered, the request kept, if GitHub
		// never answers). Beside another take-back of the comment that
		// must be written now (a pin revoked), the request is kept.
		stays := rec
		stays.Outcome = record.Kept
		stays.Reason = fmt.Sprintf("%s by @%s, whose role GitHub could not tell while the comment's other take-back was written: "+
			"the stage request stays", why, login)
		return plan.Plan{}, &commands.Undecided{
			Err: fmt.Errorf("%w (@%s's stage request of run %d: %s by @%s): %w", ErrTakeBackUnchecked,
				r.Requester, r.RunID, why, login, v.Err),
			Fallback: plan.Plan{Steps: []plan.Step{plan.Audit{Record: stays}}}}
	}
	kept, sent, cancelled := rec, rec, rec
	kept.Outcome = record.Kept
	kept.Reason = fmt.Sprintf("%s by @%s, who may not cancel @%s's stage request (it needs %s)", why, login, r.Requester,
		env.Policy(ch.Spec).Describe())
	sent.Outcome = "not_cancelled"
	sent.Reason = fmt.Sprintf("%s by @%s after its dispatch was sent: the staging side has it, and its report is still taken", why, login)
	cancelled.Outcome = string(record.StageCancelled)
	cancelled.Reason = fmt.Sprintf("%s by @%s before its dispatch was sent: the staging side was never asked", why, login)
	// What the request is now is read again in the transaction: a callback
	// that moves it meanwhile (another PR's delivery) makes nothing stale.
	return plan.Plan{Steps: []plan.Step{plan.WithdrawStage{Request: *r, Kept: kept, Sent: sent, Cancelled: cancelled,
		Allowed: v.Allowed || v.CheckFailed || r.RequesterID == ch.Actor.ID,
		Told: plan.Edit{Repo: r.Repo, PR: r.PR, Installation: r.Installation, Of: r.AckNotice, Kind: string(notices.KindStage),
			Body: fmt.Sprintf("%s staging run %s was cancelled before the staging side was asked: %s by %s.", mdtext.Mention(r.Requester),
				commands.RunLink(r.RunID, env.Notices.Web.Run(r.Repo, r.RunID)), why, mdtext.Mention(login)),
			Links: plan.Links{PR: env.Notices.Web.PR(r.Repo, r.PR), Comment: r.CommentURL}}}}}, nil
}

// request plans req: its acknowledgement, whether it replaces the requests
// still waiting in a shared slot, its dispatch and its audit.
func (h *Handler) request(env commands.Env, rc *config.Repo, req *record.StageRequest, run runs.Run) plan.RequestStage {
	web := env.Notices.Web
	step := plan.RequestStage{Request: *req,
		Ack: plan.Comment{Repo: req.Repo, PR: req.PR, Installation: req.Installation, Kind: string(notices.KindStage),
			Body: AckText(req, run.URL), Links: plan.Links{PR: web.PR(req.Repo, req.PR), Comment: req.CommentURL, Run: run.URL}},
		Dispatch: plan.Dispatch{FromRepo: req.Repo, PR: req.PR, Installation: req.Installation, ToRepo: rc.Stage.Dispatch.Repo,
			EventType: rc.Stage.Dispatch.EventType, Payload: map[string]any{
				"source-repository": req.Repo, "pr-number": strconv.Itoa(req.PR), "run-id": strconv.FormatInt(req.RunID, 10),
				"run-attempt": strconv.Itoa(req.RunAttempt), "run-date": req.RunDate, "requested-by": req.Requester,
				"comment-id": strconv.FormatInt(req.CommentID, 10), "request-token": req.Token,
			}},
		Audit: record.AuditRecord{Kind: record.AuditStage, Outcome: string(record.StageRequested), Repo: req.Repo, PR: req.PR, HeadSHA: req.RunSHA,
			RunID: req.RunID, ActorID: req.RequesterID, ActorLogin: req.Requester,
			Reason: "dispatched " + rc.Stage.Dispatch.EventType + " to " + rc.Stage.Dispatch.Repo, OriginRef: record.OriginRef{CommentID: req.CommentID, CommentURL: req.CommentURL}},
	}
	// With a shared slot, the requests still waiting when the step is
	// written are replaced by this one; each is told.
	step.Shared = rc.Stage.Slot == "shared"
	step.ReportWithin = rc.Stage.ReportTimeout
	return step
}

// Kind is the sequence that holds a PR's stage requests' report deadlines
// (plan.StageSeqKind): when one passes with its request still waiting for
// the staging side, the request is failed, its acknowledgement says why,
// and the audit records it.
func Kind(h *Handler) seq.Kind {
	// Its deadline is its next request's: that request fails, and the
	// others wait on.
	return seq.Kind{Name: plan.StageSeqKind, Wake: h.wake, Expire: h.wake}
}

func (h *Handler) wake(_ context.Context, rc *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
	ref := w.Ref
	return "stage-deadline", func(tx record.Tx) error {
		s, err := tx.Sequence(ref.Repo, ref.PR, plan.StageSeqKind)
		if err != nil || s == nil || s.Done || s.Version != ref.Version {
			return err // moved on since it was due: its own wake-up comes
		}
		var data plan.StageDeadlines
		if err := json.Unmarshal(s.Data, &data); err != nil {
			return fmt.Errorf("reading the stage deadlines of %s#%d: %w", ref.Repo, ref.PR, err)
		}
		now := tx.Now()
		var left []plan.StageDeadline
		var steps []plan.Step
		for _, d := range data.Requests {
			r, err := tx.StageRequestByComment(ref.Repo, d.CommentID)
			if err != nil {
				return err
			}
			if r == nil || r.Seq != d.Seq || r.State != record.StageRequested {
				continue // reported on (started, or done), replaced or cancelled meanwhile
			}
			if now.Before(d.By) {
				left = append(left, d)
				continue
			}
			steps = append(steps, h.expired(rc, *r, d.Within))
		}
		if len(steps) == 0 && len(left) == len(data.Requests) {
			return nil // nothing due yet (the clock went back): the next window wakes it again
		}
		if err := plan.Apply(tx, h.Notices.Teller(), plan.Plan{Steps: steps}); err != nil {
			return err
		}
		data.Requests = left
		next := *s
		if next.Data, err = json.Marshal(data); err != nil {
			return err
		}
		next.WakeAt, next.Deadline = data.Next(), data.Next()
		if len(left) == 0 {
			next.Step, next.Done = "done", true
		}
		return tx.PutSequence(&next, s.Version)
	}, nil
}

// expired fails a request the staging side did not report on within d:
// its dispatch, if the outbox still holds it, is withdrawn (the staging
// side is never asked), and its acknowledgement says so.
func (h *Handler) expired(rc *config.Repo, r record.StageRequest, d time.Duration) plan.Step {
	web := h.Notices.Web
	why := fmt.Sprintf("the staging side (%s) did not report within %s of the request", rc.Stage.Dispatch.Repo, d)
	told := plan.Edit{Repo: r.Repo, PR: r.PR, Installation: r.Installation, Of: r.AckNotice, Kind: string(notices.KindStage),
		Body: fmt.Sprintf("%s staging run %s failed: %s, so opsbot stopped waiting. Ask again with `/stage-results %d` if the run "+
			"should still be staged.", mdtext.Mention(r.Requester), runLink(r.RunID, web.Run(r.Repo, r.RunID)), mdtext.Text(why), r.RunID),
		Links: plan.Links{PR: web.PR(r.Repo, r.PR), Comment: r.CommentURL, Run: web.Run(r.Repo, r.RunID)}}
	audit := record.AuditRecord{Kind: record.AuditStage, Outcome: string(record.StageFailed), Repo: r.Repo, PR: r.PR, RunID: r.RunID,
		ActorLogin: r.Requester, Reason: why, OriginRef: r.OriginRef}
	neverSent := told
	neverSent.Body = fmt.Sprintf("%s staging run %s failed: its dispatch to the staging side (%s) could not be sent within %s, so "+
		"opsbot withdrew it and the staging side was never asked. Ask again with `/stage-results %d` if the run should still be staged.",
		mdtext.Mention(r.Requester), runLink(r.RunID, web.Run(r.Repo, r.RunID)), mdtext.Text(rc.Stage.Dispatch.Repo), d, r.RunID)
	return plan.ExpireStage{Request: r, Told: told, NeverSent: neverSent, Audit: audit}
}

// AckText is the immediate reply to a stage request.
func AckText(r *record.StageRequest, runURL string) string {
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
func (h *Handler) Callback(ctx context.Context, st record.Reader, repo string, ev *github.RepositoryDispatchEvent) (string, plan.Plan, error) {
	rc, ok := h.Cfg.Get().Repo(repo)
	if !ok {
		return "ignored-repo", plan.Plan{}, nil
	}
	p := payloadOf(ev)
	commentID, _ := strconv.ParseInt(p["comment-id"], 10, 64)
	runID, _ := strconv.ParseInt(p["run-id"], 10, 64)
	appRun, _ := strconv.ParseInt(p["app-run-id"], 10, 64)
	pr, _ := strconv.Atoi(p["pr-number"])
	succeeded := p["stage-succeeded"] == "true"
	action := ev.GetAction()
	sender := ev.GetSender()
	refused := func(reason string, id int64) plan.Step {
		return plan.Audit{Record: record.AuditRecord{Kind: record.AuditCallback, Outcome: "refused", Repo: rc.Name, PR: pr, RunID: runID, ActorID: id, ActorLogin: sender.GetLogin(), Reason: reason, OriginRef: record.OriginRef{CommentID: commentID}}}
	}
	if !h.senderListed(rc, sender.GetID()) {
		reason := fmt.Sprintf("%s for comment %d and run %d came from @%s (account %d), who is not in stage.callback_senders", action,
			commentID, runID, sender.GetLogin(), sender.GetID())
		h.Log.Warn("stage callback refused", "reason", reason)
		return "stage-callback-refused", plan.Plan{Steps: []plan.Step{refused(reason, sender.GetID())}}, nil
	}
	req, err := st.StageRequestByComment(rc.Name, commentID)
	if err != nil {
		return "", plan.Plan{}, fmt.Errorf("reading the stage request of comment %d: %w", commentID, err)
	}
	// A refusal writes its audit alone; a report is written only on the
	// request as read (ReportStage: one that moved on before it is
	// written, taken back or replaced, is decided again).
	var out plan.Plan
	matches := req != nil && req.RunID == runID && req.PR == pr && req.Pending() &&
		(action == "stage-results-started" || action == "stage-results-completed")
	if matches && (req.Token == "" || subtle.ConstantTimeCompare([]byte(req.Token), []byte(p["request-token"])) != 1) {
		reason := fmt.Sprintf("%s for comment %d and run %d does not carry the request's token (client_payload request-token)", action, commentID, runID)
		h.Log.Warn("stage callback refused", "reason", reason, "sender", sender.GetLogin())
		out.Steps = []plan.Step{refused(reason, sender.GetID())}
		return "stage-callback", out, nil
	}
	if !matches {
		reason := fmt.Sprintf("%s for comment %d, run %d and PR #%d matches no pending stage request", action, commentID, runID, pr)
		h.Log.Warn("stage callback refused", "reason", reason)
		out.Steps = []plan.Step{refused(reason, 0)}
		return "stage-callback", out, nil
	}
	web := h.Notices.Web
	r := *req
	r.AppRunID = appRun
	step := plan.ReportStage{From: req.State}
	var text string
	switch {
	case action == "stage-results-started":
		r.State = record.StageStarted
		text = fmt.Sprintf("%s staging run %s … staging in progress%s.", mdtext.Mention(r.Requester),
			runLink(r.RunID, web.Run(r.Repo, r.RunID)), h.appRunLink(rc, appRun))
	case succeeded:
		url, err := StageURL(rc, &r)
		if err != nil {
			return "", plan.Plan{}, err
		}
		r.State, r.URL = record.StageStaged, url
		text = fmt.Sprintf("%s staged run %s: %s", mdtext.Mention(r.Requester), runLink(r.RunID, web.Run(r.Repo, r.RunID)), stagedURL(url))
		if rc.Stage.Slot == "shared" {
			text += "\n\nThis shared staging slot stays with this run until the next `/stage-results` request."
			step.TakesSlot = true
		}
	default:
		r.State = record.StageFailed
		text = fmt.Sprintf("%s staging run %s failed%s.", mdtext.Mention(r.Requester), runLink(r.RunID, web.Run(r.Repo, r.RunID)),
			h.appRunLink(rc, appRun))
	}
	step.Request = r
	step.Told = plan.Edit{Repo: r.Repo, PR: r.PR, Installation: r.Installation, Of: r.AckNotice, Kind: string(notices.KindStage), Body: text,
		Links: plan.Links{PR: web.PR(r.Repo, r.PR), Comment: r.CommentURL, Run: web.Run(r.Repo, r.RunID)}}
	step.Audit = record.AuditRecord{Kind: record.AuditCallback, Outcome: string(r.State), Repo: r.Repo, PR: r.PR, RunID: r.RunID,
		ActorLogin: r.Requester, Reason: r.URL, OriginRef: record.OriginRef{CommentID: r.CommentID, CommentURL: r.CommentURL}}
	out.Steps = []plan.Step{step}
	return "stage-callback", out, nil
}

// StageURL is the staging URL of a request, from the repository's template.
func StageURL(rc *config.Repo, r *record.StageRequest) (string, error) {
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
