// Package notices writes what opsbot tells people: PR comments, reactions,
// commit statuses and dispatches for GitHub, and their mirror in Slack. It
// only enqueues: every notice goes into the outbox in the transaction of the
// change that causes it, and the senders deliver it.
package notices

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Web is the base of GitHub's web pages, "https://github.com/" or a GitHub
// Enterprise host's.
type Web string

// Base is the web base without its trailing slash ("https://github.com").
func (w Web) Base() string {
	if w == "" {
		return "https://github.com"
	}
	return strings.TrimSuffix(string(w), "/")
}

// PR links to a pull request.
func (w Web) PR(repo string, pr int) string { return fmt.Sprintf("%s/%s/pull/%d", w.Base(), repo, pr) }

// Run links to a workflow run.
func (w Web) Run(repo string, id int64) string {
	return fmt.Sprintf("%s/%s/actions/runs/%d", w.Base(), repo, id)
}

// Commit links to a commit.
func (w Web) Commit(repo, sha string) string {
	return fmt.Sprintf("%s/%s/commit/%s", w.Base(), repo, sha)
}

// Notifier says what opsbot says: it enqueues each notice (a PR comment, an edit, a
// reaction, a commit status, a check run, a dispatch, a Slack message) in
// the outbox, in the transaction of the change that causes it. (The gate
// knows it by the same name, as its notifier.)
type Notifier struct {
	// Web is GitHub's web base for links (default https://github.com/).
	Web Web
	// Mirror, when set, also posts each PR comment (and other notices worth
	// a maintainer's eye) to Slack.
	Mirror Mirror
	// CheckRuns puts a check run opsbot/sweep-gate on each decided head
	// (a GitHub App's: a token cannot make check runs), with buttons where
	// they apply.
	CheckRuns bool
	// Clicks says Slack's clicks come back to opsbot (slack.signing_secret
	// is set): only then are buttons offered in Slack (OfferSlack).
	Clicks bool
}

// ClickValue is a Slack button's value: the PR it is about and, for a
// button that names one, the run. opsbot writes it; Slack signs the click
// that carries it back (server's /slack/interactions).
type ClickValue struct {
	Repo  string `json:"repo"`
	PR    int    `json:"pr"`
	RunID int64  `json:"run,omitempty"`
	// Head is the PR's head the button was offered for: a click after the
	// head moved does nothing.
	Head string `json:"head,omitempty"`
	// Nonce names the offer the button is part of (record.Offer): each
	// button acts once.
	Nonce string `json:"nonce,omitempty"`
	// Attempt is the run's attempt a command's own button was offered
	// for (0: none named): its command refuses a click once the run moved
	// on to another attempt.
	Attempt int `json:"attempt,omitempty"`
}

// OfferSlack posts text in the PR's Slack thread with buttons of a
// command's own (commands.Button.Own), a new offer of them for head, each
// naming run and its attempt (0: none): nothing where Slack's clicks do
// not come back, or no mirror takes buttons.
func (b *Notifier) OfferSlack(tx record.Tx, repo string, pr int, head string, run int64, attempt int, text string, links Links,
	buttons []record.SlackButton) error {
	bm, ok := b.Mirror.(ButtonMirror)
	if !b.Clicks || !ok || len(buttons) == 0 {
		return nil
	}
	o := &record.Offer{Repo: repo, PR: pr, Head: head, Surface: record.OfferSlack}
	for _, btn := range buttons {
		o.Actions = append(o.Actions, btn.ActionID)
	}
	if err := tx.OfferButtons(o); err != nil {
		return err
	}
	raw, err := json.Marshal(ClickValue{Repo: repo, PR: pr, RunID: run, Attempt: attempt, Head: strings.ToLower(head), Nonce: o.Nonce})
	if err != nil {
		return err
	}
	out := slices.Clone(buttons)
	for i := range out {
		out[i].Value = string(raw)
	}
	return bm.MirrorButtons(tx, repo, pr, text, links, out)
}

// ActionSweep is the check-run button (requested_action identifier) that
// sweeps a skipped head after all; the commands' buttons are their own
// (commands.Button).
const ActionSweep = "sweep"

// CheckRun puts a check run opsbot/sweep-gate on sha: its conclusion,
// title and summary (Markdown), the run it is about and its buttons, a new
// offer of them (its external_id is pr:run:nonce).
func (b *Notifier) CheckRun(tx record.Tx, repo string, pr int, inst int64, sha, conclusion, title, summary string, runID int64,
	actions []record.CheckAction) error {
	if !b.CheckRuns {
		return nil
	}
	ext := strconv.Itoa(pr) + ":" + strconv.FormatInt(runID, 10) // the PR and the run a button acts on
	if len(actions) > 0 {
		// A new offer each time: a click brings its nonce back, and each
		// of its buttons acts once (record.Offer).
		o := &record.Offer{Repo: repo, PR: pr, Head: sha, Surface: record.OfferCheckRun}
		for _, a := range actions {
			o.Actions = append(o.Actions, a.Identifier)
		}
		if err := tx.OfferButtons(o); err != nil {
			return err
		}
		ext += ":" + o.Nonce
	}
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeCheckRun, Repo: repo, PR: pr, Installation: inst,
		SHA: sha, Context: StatusContext, State: conclusion, Description: title, Body: summary, ExternalID: ext, Actions: actions})
}

// OwnCheckPrefix starts the name of every check run of opsbot's: its
// gate's (StatusContext) and a command's own (plan.CheckOffer.Name). A
// click on a button of one of them comes back to opsbot.
const OwnCheckPrefix = "opsbot/"

// OfferCheck puts a check run of a command's own on a commit: with
// buttons, a new offer of them (record.Offer), each naming the run and
// its attempt (its external_id is pr:run:nonce:attempt); without, it only
// says how things stand. Nothing without check runs (a token, not an App).
func (b *Notifier) OfferCheck(tx record.Tx, o plan.CheckOffer) error {
	if !b.CheckRuns {
		return nil
	}
	if !strings.HasPrefix(o.Name, OwnCheckPrefix) || o.Name == StatusContext {
		return fmt.Errorf("notices: a command's own check run is named %s… and is not the gate's: %q", OwnCheckPrefix, o.Name)
	}
	ext := strconv.Itoa(o.PR) + ":" + strconv.FormatInt(o.RunID, 10)
	if len(o.Actions) > 0 {
		off := &record.Offer{Repo: o.Repo, PR: o.PR, Head: o.SHA, Surface: record.OfferCheckRun}
		for _, a := range o.Actions {
			off.Actions = append(off.Actions, a.Identifier)
		}
		if err := tx.OfferButtons(off); err != nil {
			return err
		}
		ext += ":" + off.Nonce + ":" + strconv.Itoa(o.Attempt)
	}
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeCheckRun, Repo: o.Repo, PR: o.PR,
		Installation: o.Installation, SHA: o.SHA, Context: o.Name, State: o.Conclusion, Description: o.Title, Body: o.Summary,
		ExternalID: ext, Actions: o.Actions})
}

// Kind is what a PR comment is about, for its Slack mirror.
type Kind string

// Comment kinds.
const (
	KindSkip      Kind = "skip"      // a skipped sweep (broadcast in Slack)
	KindInvalid   Kind = "invalid"   // a pin whose run no longer qualified
	KindReply     Kind = "reply"     // opsbot's answer to a command
	KindEdited    Kind = "edited"    // commands an edit added were not run
	KindStage     Kind = "stage"     // a staging request and its progress
	KindMerge     Kind = "merge"     // a merge with reuse and its progress
	KindApproval  Kind = "approval"  // an external PR's approved sweep and its progress
	KindUnchecked Kind = "unchecked" // a pinned push swept because GitHub failed; the pin stays
	KindNotGated  Kind = "not-gated" // a push the workflow does not gate; the pin stays
	// KindAfterMerge is a merged PR's run on the default branch, followed.
	KindAfterMerge Kind = "after-merge"
)

// Mirror turns a GitHub notice into its Slack message.
type Mirror interface {
	Mirror(tx record.Tx, repo string, pr int, kind Kind, text string, links Links) error
}

// ButtonMirror also posts messages of Slack's own, with buttons, in a PR's
// thread (slackmirror.Mirror).
type ButtonMirror interface {
	MirrorButtons(tx record.Tx, repo string, pr int, text string, links Links, buttons []record.SlackButton) error
}

// SlackButtons posts text with buttons in the PR's Slack thread (only in
// Slack: a click comes back to /slack/interactions); nothing without a
// mirror that takes buttons.
func (b *Notifier) SlackButtons(tx record.Tx, repo string, pr int, text string, links Links, buttons []record.SlackButton) error {
	if bm, ok := b.Mirror.(ButtonMirror); ok {
		return bm.MirrorButtons(tx, repo, pr, text, links, buttons)
	}
	return nil
}

// Links are the GitHub pages a notice is about.
type Links struct {
	PR      string
	Comment string
	Run     string
	Commit  string
}

// Reason is a decision's reason in words (the gate's Notifier).
func (b *Notifier) Reason(w record.Why) string { return Reason(w) }

// StatusContext is the commit status opsbot sets on every decided head.
const StatusContext = "opsbot/sweep-gate"

// Comment posts a PR comment (with a hidden marker) and mirrors it.
func (b *Notifier) Comment(tx record.Tx, repo string, pr int, inst int64, kind Kind, body string, links Links) (uint64, error) {
	n := &record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeComment, Repo: repo, PR: pr, Installation: inst, Body: body}
	if err := tx.Enqueue(n); err != nil {
		return 0, err
	}
	if b.Mirror != nil {
		if err := b.Mirror.Mirror(tx, repo, pr, kind, body, links); err != nil {
			return 0, err
		}
	}
	return n.ID, nil
}

// Edit replaces the body of the comment notice id posted (keeping its
// marker), and mirrors the new text.
func (b *Notifier) Edit(tx record.Tx, repo string, pr int, inst int64, of uint64, kind Kind, body string, links Links) error {
	if err := tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeEdit, Repo: repo, PR: pr,
		Installation: inst, EditOf: of, Body: body}); err != nil {
		return err
	}
	if b.Mirror != nil {
		return b.Mirror.Mirror(tx, repo, pr, kind, body, links)
	}
	return nil
}

// React adds a reaction to a user's comment.
func (b *Notifier) React(tx record.Tx, repo string, pr int, inst int64, commentID int64, content string) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeReaction, Repo: repo, PR: pr,
		Installation: inst, TargetComment: commentID, Reaction: content})
}

// ReadyContext is the commit status that says whether a merge of the PR
// now would have a reuse source (repos[].main_sweeps false).
const ReadyContext = "opsbot/reuse-ready"

// ReadyStatus sets opsbot/reuse-ready on a PR's head: state success,
// pending or failure, and why.
func (b *Notifier) ReadyStatus(tx record.Tx, repo string, pr int, inst int64, sha, state, description, targetURL string) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeStatus, Repo: repo, PR: pr,
		Installation: inst, SHA: sha, State: state, Description: description, Context: ReadyContext, TargetURL: targetURL})
}

// Status sets the sweep gate's commit status.
func (b *Notifier) Status(tx record.Tx, repo string, pr int, inst int64, sha, description, targetURL string) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeStatus, Repo: repo, PR: pr,
		Installation: inst, SHA: sha, State: "success", Description: description, Context: StatusContext, TargetURL: targetURL})
}

// Dispatch sends a repository_dispatch, and returns its notice's id.
func (b *Notifier) Dispatch(tx record.Tx, fromRepo string, pr int, inst int64, toRepo, eventType string, payload map[string]any) (uint64, error) {
	n := &record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeDispatch, Repo: toRepo, PR: pr,
		Installation: inst, EventType: eventType, Payload: payload}
	if err := tx.Enqueue(n); err != nil {
		return 0, err
	}
	return n.ID, nil
}

// Decided tells a decision: a commit status always; on skip, a PR comment;
// when the pin became invalid, a PR comment saying why.
func (b *Notifier) Decided(tx record.Tx, d *record.Decision, pin *record.Pin, inst int64) error {
	prURL := b.Web.PR(d.Repo, d.PR)
	if d.MergeOf {
		if pin != nil && pin.State == record.PinInvalid {
			return b.pinInvalidComment(tx, d, pin, inst)
		}
		return nil // the merge commit gets no status: its push gate reads the decision
	}
	if err := b.Status(tx, d.Repo, d.PR, inst, d.HeadSHA, StatusText(d), d.RunURL); err != nil {
		return err
	}
	if d.Decision == record.Skip {
		if err := b.CheckRun(tx, d.Repo, d.PR, inst, d.HeadSHA, "success", fmt.Sprintf("Sweep skipped: reusing run %d", d.RunID), SkipText(b.Web, d)+
			"\n\n**Sweep anyway** asks for this head's sweep after all: the workflow's re-run (or its next gate ask) sweeps.",
			d.RunID, []record.CheckAction{{Label: "Sweep anyway", Description: "Run this head's sweep after all", Identifier: ActionSweep}}); err != nil {
			return err
		}
	} else if err := b.CheckRun(tx, d.Repo, d.PR, inst, d.HeadSHA, "neutral", "The sweep runs",
		"The sweep of this head runs: "+mdtext.Text(d.Reason)+".", 0, nil); err != nil {
		return err
	}
	switch {
	case d.Decision == record.Skip:
		_, err := b.Comment(tx, d.Repo, d.PR, inst, KindSkip, SkipText(b.Web, d), Links{PR: prURL, Comment: d.CommentURL, Run: d.RunURL,
			Commit: b.Web.Commit(d.Repo, d.HeadSHA)})
		return err
	case pin != nil && pin.State == record.PinInvalid:
		return b.pinInvalidComment(tx, d, pin, inst)
	case d.Why.Code == record.ReasonGitHubErrorKept:
		_, err := b.Comment(tx, d.Repo, d.PR, inst, KindUnchecked, UncheckedText(b.Web, d), Links{PR: prURL,
			Run: b.Web.Run(d.Repo, d.Why.RunID), Commit: b.Web.Commit(d.Repo, d.HeadSHA)})
		return err
	}
	return nil
}

// NotGated tells a PR with an active pin that a push was not gated (d is
// the gate's unstored answer): nothing was decided and the pin stays.
func (b *Notifier) NotGated(tx record.Tx, d *record.Decision, pin *record.Pin, inst int64) error {
	_, err := b.Comment(tx, d.Repo, d.PR, inst, KindNotGated, NotGatedText(b.Web, d, pin), Links{PR: b.Web.PR(d.Repo, d.PR),
		Comment: pin.CommentURL, Run: b.Web.Run(d.Repo, pin.RunID), Commit: b.Web.Commit(d.Repo, d.HeadSHA)})
	return err
}

// NotGatedText is the PR comment of a push the workflow does not gate
// while a pin waits.
func NotGatedText(web Web, d *record.Decision, pin *record.Pin) string {
	return fmt.Sprintf("⏸️ **Not gated: %s.** The sweep workflow runs its gate only for a PR that is not a draft, has a full sweep's "+
		"label and none that makes the sweep partial, so it does not ask opsbot about %s and sweeps as the labels say. opsbot decided "+
		"nothing for it: the pin of run %s by %s stays for the next push that is gated. (Said once; opsbot says it again only when "+
		"the reason changes.)", d.Why.Detail, commitLink(web, d.Repo, d.HeadSHA), runLink(pin.RunID, pin.RunURL), mdtext.Mention(pin.ActorLogin))
}

// UncheckedText is the PR comment when GitHub failed while a pinned run
// was checked: the push sweeps and the pin waits for the next.
func UncheckedText(web Web, d *record.Decision) string {
	return fmt.Sprintf("⚠️ **%s sweeps**: GitHub did not answer while opsbot checked pinned run %s (%s). "+
		"The pin by %s stays: the next push of this PR is checked again and may reuse the run.",
		commitLink(web, d.Repo, d.HeadSHA), runLink(d.Why.RunID, web.Run(d.Repo, d.Why.RunID)), d.Why.Detail, mdtext.Mention(d.Why.Actor))
}

func (b *Notifier) pinInvalidComment(tx record.Tx, d *record.Decision, pin *record.Pin, inst int64) error {
	_, err := b.Comment(tx, d.Repo, d.PR, inst, KindInvalid, InvalidText(b.Web, d, pin), Links{PR: b.Web.PR(d.Repo, d.PR),
		Comment: pin.CommentURL, Run: b.Web.Run(d.Repo, pin.RunID), Commit: b.Web.Commit(d.Repo, d.HeadSHA)})
	return err
}

// PinClosed tells that a pin was revoked or expired (not by a decision).
// why is Markdown: escape what it quotes with mdtext.
func (b *Notifier) PinClosed(tx record.Tx, p *record.Pin, inst int64, why string) error {
	_, err := b.Teller().Comment(tx, b.PinClosedComment(p, inst, why))
	return err
}

// StatusText is the commit status description of a decision: plain text
// on one line (GitHub renders no Markdown there).
func StatusText(d *record.Decision) string {
	if d.Decision == record.Skip {
		return mdtext.Line(fmt.Sprintf("skip: reusing run %d, authorized by @%s", d.RunID, d.ActorLogin))
	}
	switch d.Why.Code {
	case record.ReasonNoPin, record.ReasonNoPinWhenDecided:
		return "sweep: no reuse authorization"
	}
	return mdtext.Line("sweep: " + DecisionReason(d))
}

// DecisionReason is a decision's reason in words.
func DecisionReason(d *record.Decision) string { return Reason(d.Why) }

// Reason words a decision's reason, as Markdown (a detail is quoted as
// runs or mdtext wrote it). The gate stores it as the decision's Reason.
func Reason(w record.Why) string {
	switch w.Code {
	case record.ReasonNotGateAction:
		return fmt.Sprintf("pull_request action %q does not decide the sweep (only %v do)", w.Action, w.GateActions)
	case record.ReasonNotGated:
		return fmt.Sprintf("not gated: %s; the workflow sweeps as the PR's labels ask, opsbot decided nothing for %s, and a pin stays "+
			"for the next gated push", w.Detail, mdtext.ShortSHA(w.SHA))
	case record.ReasonNoPin:
		return "no reuse authorization"
	case record.ReasonNoPinWhenDecided:
		return "no reuse authorization when this push was decided"
	case record.ReasonPinnedAtHead:
		return fmt.Sprintf("run %d was pinned when this commit was already the head; the pin covers the next push", w.RunID)
	case record.ReasonUncheckable:
		return fmt.Sprintf("pinned run %d %s", w.RunID, pinWhy(w))
	case record.ReasonGitHubError:
		return fmt.Sprintf("pinned run %d %s", w.RunID, pinWhy(w))
	case record.ReasonGitHubErrorKept:
		return fmt.Sprintf("pinned run %d could not be checked (GitHub: %s), so this push sweeps; the pin stays for the next push", w.RunID, w.Detail)
	case record.ReasonRunRejected:
		return fmt.Sprintf("pinned run %d no longer qualifies: %s", w.RunID, w.Detail)
	case record.ReasonNotHead:
		return fmt.Sprintf("commit %s is no longer the head of PR #%d (GitHub says %s is); the pin of run %d is left for the head",
			mdtext.ShortSHA(w.SHA), w.PR, mdtext.ShortSHA(w.GitHubHead), w.RunID)
	case record.ReasonNotHeadRejected:
		return fmt.Sprintf("commit %s is no longer the head of PR #%d (GitHub says %s is), and pinned run %d does not qualify for it: %s; "+
			"the pin of run %d is left for the head", mdtext.ShortSHA(w.SHA), w.PR, mdtext.ShortSHA(w.GitHubHead), w.RunID, w.Detail, w.RunID)
	case record.ReasonReuse:
		return fmt.Sprintf("reusing run %d, authorized by @%s", w.RunID, w.Actor)
	case record.ReasonPinChanged:
		return "the reuse authorization changed while this push was decided"
	case record.ReasonMerged:
		return fmt.Sprintf("merged reusing run %d, authorized by @%s", w.RunID, w.Actor)
	case record.ReasonMergeRejected:
		return fmt.Sprintf("pinned run %d no longer qualified at merge: %s", w.RunID, w.Detail)
	case record.ReasonRecorded:
		return w.Detail
	}
	return fmt.Sprintf("reason %q", w.Code)
}

// pinWhy is why a pinned run is invalid, as the invalid pin's comment
// says it after the run's link.
func pinWhy(w record.Why) string {
	switch w.Code {
	case record.ReasonUncheckable:
		return "could not be checked: " + w.Detail
	case record.ReasonGitHubError:
		return fmt.Sprintf("could not be checked (GitHub: %s)", w.Detail)
	case record.ReasonRunRejected, record.ReasonMergeRejected, record.ReasonRecorded:
		return w.Detail
	}
	return Reason(w)
}

// SkipText is the PR comment of a skip decision.
func SkipText(web Web, d *record.Decision) string {
	saved := ""
	if d.Jobs > 0 || d.RunnerSeconds > 0 {
		saved = fmt.Sprintf(" The run covers %d of %d jobs (succeeded); this push saves %.1f runner hours", d.JobsSucceeded, d.Jobs,
			float64(d.RunnerSeconds)/3600)
		if d.GPUSeconds > 0 {
			saved += fmt.Sprintf(" (%.1f GPU hours)", float64(d.GPUSeconds)/3600)
		}
		saved += "."
	}
	where := " by a click"
	if d.CommentURL != "" {
		where = " in " + mdtext.Link("this comment", d.CommentURL)
	}
	return fmt.Sprintf("⏭️ **Sweep skipped for %s**: reusing run %s (commit %s), authorized by %s%s.%s\n\n"+
		"The pin is used up: the next push sweeps unless someone pins a run again.",
		commitLink(web, d.Repo, d.HeadSHA), runLink(d.RunID, d.RunURL), mdtext.Code(mdtext.ShortSHA(d.RunSHA)), mdtext.Mention(d.ActorLogin),
		where, saved)
}

// InvalidText is the PR comment when a pinned run no longer qualifies. The
// decision's details are Markdown (runs writes names as code spans).
func InvalidText(web Web, d *record.Decision, p *record.Pin) string {
	what := fmt.Sprintf("%s sweeps", commitLink(web, d.Repo, d.HeadSHA))
	if d.MergeOf {
		what = "the merge reuses no run"
	}
	why := pinWhy(d.Why)
	return fmt.Sprintf("🔁 **The pin of run %s is invalid**: %s. It was authorized by %s; %s.\n\n"+
		"Pin a run again with `/reuse-sweep-run <run>` if a later push should reuse one.",
		runLink(p.RunID, web.Run(d.Repo, p.RunID)), why, mdtext.Mention(p.ActorLogin), what)
}

func commitLink(web Web, repo, sha string) string {
	return mdtext.Link(mdtext.Code(mdtext.ShortSHA(sha)), web.Commit(repo, sha))
}

func runLink(id int64, url string) string { return mdtext.Link(strconv.FormatInt(id, 10), url) }

// Teller puts the notices of a command's plan into the outbox, with their
// Slack mirror (plan.Teller): the plan carries their words.
func (b *Notifier) Teller() plan.Teller { return teller{b} }

type teller struct{ b *Notifier }

func (t teller) Comment(tx record.Tx, c plan.Comment) (uint64, error) {
	return t.b.Comment(tx, c.Repo, c.PR, c.Installation, Kind(c.Kind), c.Body, Links(c.Links))
}

func (t teller) Edit(tx record.Tx, e plan.Edit) error {
	return t.b.Edit(tx, e.Repo, e.PR, e.Installation, e.Of, Kind(e.Kind), e.Body, Links(e.Links))
}

func (t teller) Dispatch(tx record.Tx, d plan.Dispatch) (uint64, error) {
	return t.b.Dispatch(tx, d.FromRepo, d.PR, d.Installation, d.ToRepo, d.EventType, d.Payload)
}

func (t teller) OfferCheck(tx record.Tx, o plan.CheckOffer) error { return t.b.OfferCheck(tx, o) }

func (t teller) OfferSlack(tx record.Tx, o plan.SlackOffer) error {
	return t.b.OfferSlack(tx, o.Repo, o.PR, o.Head, o.RunID, o.Attempt, o.Text, Links(o.Links), o.Buttons)
}

func (t teller) React(tx record.Tx, repo string, pr int, inst int64, commentID int64, content string) error {
	return t.b.React(tx, repo, pr, inst, commentID, content)
}

func (t teller) StageUnstaged(tx record.Tx, prev, by record.StageRequest) error {
	_, err := t.b.Comment(tx, prev.Repo, prev.PR, prev.Installation, KindStage,
		fmt.Sprintf("Run %d of this PR is no longer staged: run %d of PR #%d took the shared staging slot. Comment `/stage-results` to stage it again.",
			prev.RunID, by.RunID, by.PR), Links{PR: t.b.Web.PR(prev.Repo, prev.PR)})
	return err
}

func (t teller) StageReplaced(tx record.Tx, old, by record.StageRequest) error {
	return t.b.Edit(tx, old.Repo, old.PR, old.Installation, old.AckNotice, KindStage,
		fmt.Sprintf("%s staging run %d was replaced by a newer request (run %d of PR #%d) for the shared staging slot.",
			mdtext.Mention(old.Requester), old.RunID, by.RunID, by.PR), Links{PR: t.b.Web.PR(old.Repo, old.PR), Comment: old.CommentURL})
}

// PinClosedComment is the PR comment that says pin p is closed (p.State)
// and why.
func (b *Notifier) PinClosedComment(p *record.Pin, inst int64, why string) plan.Comment {
	return plan.Comment{Repo: p.Repo, PR: p.PR, Installation: inst, Kind: string(p.State),
		Body: fmt.Sprintf("The pin of run %s by %s is **%s**: %s.", runLink(p.RunID, b.Web.Run(p.Repo, p.RunID)),
			mdtext.Mention(p.ActorLogin), mdtext.Text(string(p.State)), why),
		Links: plan.Links{PR: b.Web.PR(p.Repo, p.PR), Comment: p.CommentURL, Run: b.Web.Run(p.Repo, p.RunID)}}
}

// ActionsText says what a check run's buttons do, from the buttons
// themselves: "**Label**: description; …." (empty without buttons), so a
// button a command adds is described where it is offered.
func ActionsText(actions []record.CheckAction) string {
	var parts []string
	for _, a := range actions {
		d := a.Description
		if d != "" {
			d = strings.ToLower(d[:1]) + d[1:]
		}
		parts = append(parts, "**"+mdtext.Text(a.Label)+"**: "+mdtext.Text(d))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "."
}
