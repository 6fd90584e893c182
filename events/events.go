// Package events turns a stored webhook delivery into what it means for
// opsbot: commands from PR comments, gate decisions from pushes, pin
// expiry from closed PRs, and stage callbacks from repository dispatches.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// Handler routes deliveries. It implements worker.Handler.
type Handler struct {
	// SlackButtons puts buttons on Slack messages (clicks are taken:
	// slack.signing_secret_env is set).
	SlackButtons bool
	// AppID is opsbot's GitHub App (0: a token): a click is taken only on
	// its own check runs.
	AppID int64
	Cfg   *config.Live
	Log   *slog.Logger
	// Clients gives each installation's GitHub client and remembers each
	// repository's installation from its webhooks, for asks without one.
	Clients *ghclient.Clients
	// Commands are the commands opsbot runs (the registry newApp builds).
	Commands *commands.Registry
	Checker  *auth.Checker
	Gate     *gate.Gate
	Notices  *notices.Notifier
	Stage    StageHandler // the staging side's reports; nil until staging is wired
	SelfID   int64
	SelfName string
	// Users holds the account ids of allow_users logins; logins of a
	// repository whose client was unknown at start are resolved at its
	// first comment.
	Users *auth.Directory
	// Marks reads what opsbot has seen of a comment: a `created` delivery
	// processed after an edit or a deletion of its comment runs at most
	// what the comment still says.
	Marks Marks
	// Acts are the process's marks of acts that cannot be taken back, the
	// ones the commands make (commands.Deps.Acts): each step is handed
	// them (seq.Wakeup.Marks), and its Send uses an act's mark up there.
	Acts *seq.Marks
	// State is what command handlers read before they plan (the store).
	State record.Reader
	// Sequences are the kinds of sequence opsbot steps, by name.
	Sequences map[string]seq.Kind
	// Seqs reads the sequences and what waits in the inbox (the store):
	// the engine's part of a wake-up.
	Seqs SeqReader
	// Now is the clock of the sequences' deadlines (nil: time.Now).
	Now func() time.Time
	// Buttons reads the buttons opsbot offered and which were used (the
	// store): each acts once.
	Buttons ButtonReader
	// Routes are the kinds' event routes (NewRoutes): what a delivery of
	// an event a kind routes records.
	Routes *Routes
}

// ButtonReader reads an offer of buttons by its nonce (nil: none).
type ButtonReader interface {
	ButtonOffer(repo, nonce string) (*record.Offer, error)
}

// SeqReader is what the sequence engine reads of opsbot's state.
type SeqReader interface {
	Sequence(repo string, pr int, kind string) (*record.Sequence, error)
	// Waiting reports whether a delivery other than self waits in the
	// inbox with ordering key key and is one match takes.
	Waiting(key string, self uint64, match func(event, action string) bool) (bool, error)
}

// Marks reads comments' seen marks.
type Marks interface {
	CommentMark(repo string, commentID int64) (state.CommentMark, error)
}

// CommentReader reads a comment's body as GitHub has it now.
type CommentReader interface {
	CommentBody(ctx context.Context, repo string, id int64) (string, error)
}

// StageHandler takes the staging side's reports (repository_dispatch).
type StageHandler = commands.Reports

var _ worker.Handler = (*Handler)(nil)

// Handle decodes the delivery and hands it to the part of opsbot it concerns.
func (h *Handler) Handle(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
	rc, ok := h.Cfg.Get().Repo(d.Repo)
	if !ok {
		return "ignored-repo", nil, nil // the configuration changed since it was stored
	}
	k, own := kindOf(d.Event)
	routed := len(h.Routes.of(d.Event)) > 0
	if !own && !routed {
		return "ignored", nil, nil
	}
	if h.Commands == nil {
		// Without the commands no comment could be read: nothing is
		// decided, and the delivery stays to be tried again.
		return "", nil, errors.New("events: the handler has no command registry")
	}
	var out string
	var w state.Write
	var err error
	if own && k.handle != nil {
		if out, w, err = k.handle(h, ctx, rc, d); err != nil {
			return out, w, err
		}
	}
	if routed && d.PR > 0 {
		if out, w, err = h.Routes.record(ctx, rc, d, out, w); err != nil {
			return "", nil, err
		}
	}
	wakes := routed || (own && k.wakes)
	if d.PR <= 0 || (w == nil && !wakes) {
		return out, w, nil // nothing written: nothing the reuseReadiness reads changed
	}
	return out, func(tx *state.Tx) error {
		if w != nil {
			if err := w(tx); err != nil {
				return err
			}
		}
		if wakes {
			if err := tx.WakeSequences(rc.Name, d.PR, tx.Now()); err != nil {
				return err
			}
			// The commit may be another PR's watched merge commit too.
			if sha := commitOf(d); sha != "" {
				if err := tx.WakeWatching(rc.Name, sha, d.PR, tx.Now()); err != nil {
					return err
				}
			}
		}
		// What the delivery changed may change whether a merge now has a
		// reuse source.
		return h.setReuseReady(tx, rc, d.PR)
	}, nil
}

func (h *Handler) handleComment(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	if d.NoCommands {
		// Seen, with nothing to run: recovery must not run it later
		// (say, after an edit added a command).
		return "no-commands", processed(rc.Name, d.CommentID), nil
	}
	c, err := h.commentOf(d)
	if err != nil || c == nil {
		return "ignored-issue", nil, err
	}
	return h.comment(ctx, rc, c)
}

func (h *Handler) handlePull(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var ev PullPayload
	if err := decode(d, &ev); err != nil {
		return "", nil, err
	}
	return h.pullRequest(ctx, rc, d, &ev)
}

func (h *Handler) handleDispatch(ctx context.Context, _ *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var ev github.RepositoryDispatchEvent
	if err := decode(d, &ev); err != nil {
		return "", nil, err
	}
	if h.Stage == nil {
		return "ignored-dispatch", nil, nil
	}
	if h.State == nil {
		return "", nil, worker.Permanent(errors.New("events: the handler has no state reader (events.Handler.State)"))
	}
	out, p, err := h.Stage.Callback(ctx, h.State, d.Repo, &ev)
	if err != nil || p.Empty() {
		return out, nil, err
	}
	t := h.Notices.Teller()
	return out, func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
}

// handleWakeup steps a due sequence (seq.Ticker's delivery) through its
// kind: the engine's part of every kind. It steps the sequence only at the
// version that was due; at or past its deadline it runs the kind's Expire
// (or ends it as expired); a step that yields (seq.ErrYield: a delivery
// that may stop it waits for the PR) is made due again, behind what waits;
// and a step that left the sequence as it was, still due, waits for an
// event, its deadline or its next wake-up instead of being woken again in
// every retry window. A kind this build does not know changes nothing.
func (h *Handler) handleWakeup(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var p seq.Payload
	if err := decode(d, &p); err != nil {
		return "", nil, err
	}
	k, ok := h.Sequences[p.Wakeup.Kind]
	if !ok || k.Wake == nil {
		h.Log.Warn("a wake-up of a kind of sequence this opsbot does not know; nothing done", "kind", p.Wakeup.Kind,
			"repo", rc.Name, "pr", d.PR)
		return "wakeup-unknown-kind", nil, nil
	}
	if h.Seqs == nil {
		return "", nil, worker.Permanent(errors.New("events: the handler has no sequence reader (events.Handler.Seqs)"))
	}
	ref := p.Wakeup
	ref.Repo, ref.PR = rc.Name, d.PR
	cur, err := h.Seqs.Sequence(ref.Repo, ref.PR, ref.Kind)
	if err != nil {
		return "", nil, err
	}
	if cur == nil || (cur.Done && !cur.Holds()) || cur.Version != ref.Version {
		return ref.Kind + "-moved-on", nil, nil // done, or moved since it was due: its own wake-up comes
	}
	now := h.now()
	if cur.Done {
		// Done, and what it made on GitHub is still there: the kind's
		// cleanup, until a write of its own drops the last of it.
		if k.Cleanup == nil {
			h.Log.Error("a done sequence holds something on GitHub and its kind has no cleanup; delete it by hand", "kind", ref.Kind,
				"repo", ref.Repo, "pr", ref.PR, "left", cur.Left)
			return ref.Kind + "-left-behind", func(tx *state.Tx) error { return forgetLeft(tx, ref) }, nil
		}
		out, write, err := k.Cleanup(ctx, rc, seq.Wakeup{Ref: ref, Seq: cur, Now: now, Marks: h.Acts})
		if err != nil || write == nil {
			return out, nil, err
		}
		return out, func(tx *state.Tx) error { return write(tx) }, nil
	}
	key := d.Key()
	w := seq.Wakeup{Ref: ref, Seq: cur, Now: now, Marks: h.Acts, Clear: func() error {
		waiting, err := h.Seqs.Waiting(key, d.Seq, MayStop)
		if err != nil {
			return fmt.Errorf("reading what waits for %s: %w", key, err)
		}
		if waiting {
			return seq.ErrYield
		}
		return nil
	}}
	step, expired := k.Wake, !cur.Deadline.IsZero() && !now.Before(cur.Deadline)
	if expired {
		step = k.Expire
		if step == nil {
			step = expire
		}
	}
	out, write, err := step(ctx, rc, w)
	if errors.Is(err, seq.ErrYield) {
		h.Log.Info("a sequence's step yields to a delivery that may stop it; stepped again after it", "kind", ref.Kind,
			"repo", ref.Repo, "pr", ref.PR, "step", cur.Step)
		return ref.Kind + "-yielded", func(tx *state.Tx) error { return yielded(tx, ref) }, nil
	}
	if err != nil {
		return out, nil, err
	}
	return out, func(tx *state.Tx) error {
		if write != nil {
			if err := write(tx); err != nil {
				return err
			}
		}
		if err := settle(tx, ref, now); err != nil {
			return err
		}
		// A step may change what a merge would reuse (a pin revoked, a
		// sweep an approval completed).
		return h.setReuseReady(tx, rc, d.PR)
	}, nil
}

// MayStop says which deliveries may stop a sequence, so a step yields to
// them before an act it cannot take back: a comment that may hold a
// command (a cancel, a command edited away, its comment deleted: a comment
// with no command line is never in the inbox), a click, a check run's
// button, and the changes of the PR that stop one (a push, a close, a
// retarget or any edit, a draft).
func MayStop(event, action string) bool {
	switch event {
	case EventComment, EventClick:
		return true
	case EventPull:
		switch action {
		case "synchronize", "closed", "edited", "converted_to_draft", "reopened":
			return true
		}
	case EventCheckRun:
		return action == "requested_action"
	}
	return false
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// expire ends a sequence whose kind has no Expire at its deadline.
func expire(_ context.Context, _ *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
	ref := w.Ref
	return ref.Kind + "-expired", func(tx record.Tx) error {
		s, err := tx.Sequence(ref.Repo, ref.PR, ref.Kind)
		if err != nil || s == nil || s.Done || s.Version != ref.Version {
			return err
		}
		next := *s
		next.Step, next.Done, next.Why = "expired", true, "expired: its deadline passed"
		return tx.PutSequence(&next, s.Version)
	}, nil
}

// forgetLeft drops what a done sequence of a kind without a cleanup holds
// (logged for a maintainer to delete), so it is not woken again.
func forgetLeft(tx *state.Tx, ref record.SeqRef) error {
	s, err := tx.Sequence(ref.Repo, ref.PR, ref.Kind)
	if err != nil || s == nil || !s.Done || s.Version != ref.Version {
		return err
	}
	next := *s
	next.Left = nil
	return tx.PutSequence(&next, s.Version)
}

// yielded makes the sequence due again at once, as its next version: the
// ticker hands over its wake-up anew, stored behind what waits for the PR.
func yielded(tx *state.Tx, ref record.SeqRef) error {
	s, err := tx.Sequence(ref.Repo, ref.PR, ref.Kind)
	if err != nil || s == nil || s.Done || s.Version != ref.Version {
		return err
	}
	next := *s
	next.WakeAt = tx.Now()
	return tx.PutSequence(&next, s.Version)
}

// settle keeps a step that left its sequence as it was (nothing to do
// yet: an event woke it early) from being woken again in every window: one
// with a deadline still to come waits for it, or for an event. One without
// a deadline, or whose deadline passed and whose kind did not end it (the
// step could not yet), stays due as it is, and is woken again in the next
// retry window. A sequence the step moved is left as its write made it.
func settle(tx *state.Tx, ref record.SeqRef, now time.Time) error {
	s, err := tx.Sequence(ref.Repo, ref.PR, ref.Kind)
	if err != nil || s == nil || s.Done || s.Version != ref.Version {
		return err
	}
	if s.Deadline.IsZero() || !now.Before(s.Deadline) || s.WakeAt.IsZero() || s.WakeAt.After(now) {
		return nil
	}
	next := *s
	next.WakeAt = time.Time{}
	return tx.PutSequence(&next, s.Version)
}

// commentOf is a comment delivery as ingest recorded it (Parsed), with its
// commands: read here from the body unless a parse of the running parser's
// version is stored (ingest stores none; the inbox upgrade at start may
// have). Nil: the comment is not on a PR. A delivery stored without a
// record (by a build before ingest made one) is given one at start
// (UpgradeInbox); one still without is refused.
func (h *Handler) commentOf(d *state.Delivery) (*commentRecord, error) {
	if len(d.Parsed) == 0 {
		return nil, worker.Permanent(fmt.Errorf("the %s delivery %s has no recorded parse: it was stored by an older opsbot "+
			"and not upgraded (opsbot upgrades the inbox when it starts)", d.Event, d.ID))
	}
	var in ingested
	if err := json.Unmarshal(d.Parsed, &in); err != nil {
		return nil, worker.Permanent(fmt.Errorf("decoding what ingest recorded of the %s delivery: %w", d.Event, err))
	}
	c := in.Comment
	if c == nil || c.Parser == commands.ParserVersion {
		return c, nil
	}
	opt := commands.Options{Repo: d.Repo, Host: h.Cfg.Get().WebHost()}
	if err := parseCommands(c, d.Body, h.Commands, opt); err != nil {
		return nil, worker.Permanent(err)
	}
	return c, nil
}

// UpgradeInbox gives every pending comment delivery the record ingest
// would make of it now, with its commands read by the running parser, when
// it has none (stored by a build before ingest recorded one) or a parse of
// another parser version (stored by an older build, or not read yet): a
// delivery that waited through an upgrade runs what this build reads in
// it, and the worker reads every comment the same way. Run at start,
// before the workers. It returns how many deliveries it upgraded.
func UpgradeInbox(store interface {
	RewritePending(fn func(d *state.Delivery) (bool, error)) (int, error)
}, s *Schema, log *slog.Logger) (int, error) {
	return store.RewritePending(func(d *state.Delivery) (changed bool, _ error) {
		if d.Event != EventComment || d.NoCommands {
			return false, nil
		}
		// A body the parser cannot take stays as it is (the worker refuses
		// it, to the dead letters with why); it never stops opsbot starting.
		defer func() {
			if r := recover(); r != nil {
				log.Error("a pending comment delivery could not be given its parse; the worker will refuse it", "delivery", d.ID, "panic", r)
				changed = false
			}
		}()
		if len(d.Parsed) > 0 {
			return reparse(d, s, log), nil
		}
		now, _, err := s.Classify(d.Event, d.ID, d.Body)
		if err != nil {
			// A body that is not a payload stays as it is: the worker
			// refuses it, and it goes to the dead letters with why.
			log.Warn("a pending comment delivery is not a payload; the worker will refuse it", "delivery", d.ID, "err", err)
			return false, nil
		}
		if now == nil {
			// Not on a PR, or of a repository no longer served: nothing to do.
			d.Parsed = json.RawMessage("{}")
			return true, nil
		}
		d.Parsed, d.NoCommands, d.CommentID = now.Parsed, now.NoCommands, now.CommentID
		if d.NoCommands {
			d.Parsed = nil
			return true, nil
		}
		reparse(d, s, log)
		return true, nil
	})
}

// reparse reads again the commands of a pending comment delivery whose
// stored parse is of another parser version than the running one, and
// reports whether it changed the record.
func reparse(d *state.Delivery, s *Schema, log *slog.Logger) bool {
	var in ingested
	if err := json.Unmarshal(d.Parsed, &in); err != nil || in.Comment == nil || in.Comment.Parser == commands.ParserVersion {
		return false // not a record to read again: the worker decides as it would have
	}
	if s.Commands == nil {
		return false
	}
	was := in.Comment.Parser
	if err := parseCommands(in.Comment, d.Body, s.Commands, commands.Options{Repo: d.Repo, Host: s.WebHost}); err != nil {
		log.Warn("a pending comment delivery's commands could not be read again; the worker will refuse it", "delivery", d.ID, "err", err)
		return false
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return false
	}
	log.Info("read a pending comment's commands again with this build's parser", "delivery", d.ID,
		"parser_was", was, "parser", commands.ParserVersion)
	d.Parsed = raw
	return true
}

// commitOf is the commit an event that names only a commit (a check
// suite's, a check run's, a status's, a workflow run's) is about: "" for
// another event, or a body without one.
func commitOf(d *state.Delivery) string {
	switch d.Event {
	case EventCheckSuite, EventCheckRun, EventStatus, EventWorkflowRun:
	default:
		return ""
	}
	var env envelope
	if decodeBody(d.Body, &env) != nil {
		return ""
	}
	return strings.ToLower(env.commit())
}

func decode(d *state.Delivery, v any) error {
	if err := json.Unmarshal(d.Body, v); err != nil {
		return worker.Permanent(fmt.Errorf("decoding the %s payload: %w", d.Event, err))
	}
	return nil
}

func (h *Handler) env(ctx context.Context, rc *config.Repo, inst int64) (commands.Env, error) {
	client, err := h.Clients.For(inst)
	if err != nil {
		return commands.Env{}, worker.Permanent(err)
	}
	if h.Users != nil {
		h.Users.Resolve(ctx, client, rc.AllowUsers()) // only logins never looked up: none after start
	}
	cfg := h.Cfg.Get()
	return commands.Env{Repo: rc, Commands: h.Commands, Checker: h.Checker, Lookup: client,
		Notices: h.Notices, State: h.State, Log: worker.Logger(ctx, h.Log), WebHost: cfg.WebHost(), Users: h.Users,
		MaxReplies:               cfg.Notices.MaxRepliesPerUserPerHour,
		MaxOutsiderReactions:     cfg.Notices.MaxOutsiderReactionsPerUserPerHour,
		MaxOutsiderReactionsRepo: cfg.Notices.MaxOutsiderReactionsPerRepoPerHour}, nil
}

// stateWrite is a command's write as the store runs it.
func stateWrite(w commands.Write) state.Write {
	if w == nil {
		return nil
	}
	return func(tx *state.Tx) error { return w(tx) }
}

func (h *Handler) comment(ctx context.Context, rc *config.Repo, ev *commentRecord) (string, state.Write, error) {
	u := ev.Author
	actor := auth.Actor{ID: u.ID, Login: u.Login, Type: u.Type}
	if (h.SelfID != 0 && actor.ID == h.SelfID) || (h.SelfName != "" && strings.EqualFold(actor.Login, h.SelfName)) {
		if ev.Action == "created" {
			return "ignored-self", processed(rc.Name, ev.ID), nil
		}
		return "ignored-self", noted(rc.Name, ev.ID, ev.Action == "deleted"), nil
	}
	c := commands.Comment{Invocation: commands.Invocation{Repo: rc.Name, PR: ev.PR, PRState: ev.PRState, Actor: actor,
		Installation: ev.Installation, ExpectHead: ev.ExpectHead,
		Origin: commands.Origin{Kind: commands.OriginComment, ID: ev.ID, URL: ev.URL}},
		Author: actor, Commands: loadCommands(ev.Commands), OldCommands: loadCommands(ev.OldCommands)}
	if ev.Action == "edited" || ev.Action == "deleted" {
		// The person who edited or deleted, not the comment's author.
		s := ev.Sender
		c.Actor = auth.Actor{ID: s.ID, Login: s.Login, Type: s.Type}
		c.Recovered = ev.TakenBack
	}
	if ev.Action == "created" && len(c.Commands) == 0 {
		return "no-commands", processed(rc.Name, ev.ID), nil
	}
	env, err := h.env(ctx, rc, c.Installation)
	if err != nil {
		return "", nil, err
	}
	info := &state.PRInfo{Repo: rc.Name, PR: c.PR, Title: ev.PRTitle, Author: ev.PRAuthor,
		State: ev.PRState, Installation: c.Installation}
	// The repository's installation is recorded with what the comment changes.
	remember := h.rememberInstallation(rc.Name, c.Installation)
	withInfo := func(out string, w state.Write) (string, state.Write, error) {
		return out, then(remember, func(tx *state.Tx) error {
			if err := mergeInfo(tx, info); err != nil {
				return err
			}
			if w == nil {
				return nil
			}
			return w(tx)
		}), nil
	}
	switch ev.Action {
	case "created":
		if err := h.takenBack(ctx, rc, &c); err != nil {
			return "", nil, err
		}
		out, w := commands.Created(ctx, env, c)
		if w == nil {
			return out, then(remember, processed(rc.Name, ev.ID)), nil // no commands: only that it was seen
		}
		return withInfo(out, stateWrite(w))
	case "edited":
		out, w := commands.Edited(ctx, env, c)
		return withInfo(out, then(noted(rc.Name, ev.ID, false), stateWrite(w)))
	case "deleted":
		out, w := commands.Deleted(ctx, env, c)
		return withInfo(out, then(noted(rc.Name, ev.ID, true), stateWrite(w)))
	}
	return "ignored-action", nil, nil
}

// ActionHeadUnknown is the action of a pull_request delivery reconcile
// makes (its id RecoveryIDPrefix's) for an open PR with a pin whose head
// opsbot does not know: it records the PR as GitHub has it now, head and
// labels, and decides nothing, so opsbot/reuse-ready is set on it. GitHub
// sends no such action.
const ActionHeadUnknown = "opsbot_head_unknown"

func (h *Handler) pullRequest(ctx context.Context, rc *config.Repo, d *state.Delivery, ev *PullPayload) (string, state.Write, error) {
	pr := &ev.PullRequest
	// GitHub sends lower-case SHAs; opsbot keys decisions by that spelling.
	pr.Head.SHA, pr.MergeCommitSHA = strings.ToLower(pr.Head.SHA), strings.ToLower(pr.MergeCommitSHA)
	n := ev.PRNumber()
	// GitHub's pull_request webhooks always carry the PR's labels (an empty
	// list for none); a payload without the key says nothing of them, and
	// the gate API then reads them from GitHub.
	labels, known := pr.LabelNames(), pr.Labels != nil
	info := &state.PRInfo{Repo: rc.Name, PR: n, Title: pr.Title, Author: pr.User.Login,
		Branch: pr.Head.Ref, HeadSHA: pr.Head.SHA, HeadAt: pr.UpdatedAt, State: pr.State,
		Labels: labels, Draft: pr.Draft, LabelsKnown: known, LabelsAt: pr.UpdatedAt}
	reconciled := ev.Action == ActionHeadUnknown && strings.HasPrefix(strings.ToLower(d.ID), RecoveryIDPrefix)
	if a := ev.Action; a != "opened" && a != "reopened" && a != "synchronize" && !reconciled {
		// The head opsbot knows (which the gate API decides for) moves only
		// with a push; a late label or edit event may carry an older one.
		info.HeadSHA, info.HeadAt = "", time.Time{}
	}
	inst := ev.Installation.ID
	info.Installation = inst
	remember := h.rememberInstallation(rc.Name, inst)
	// The repository's installation is recorded with what the event changes.
	recordInfo := then(remember, func(tx *state.Tx) error { return mergeInfo(tx, info) })
	action := ev.Action
	switch {
	case rc.IsGateAction(action):
		dec, err := h.Gate.Decide(ctx, gate.Ask{Repo: rc.Name, PR: n, SHA: pr.Head.SHA, Action: action, Source: "webhook",
			DeliveryID: d.ID, Installation: inst, Labels: labels, Draft: pr.Draft, LabelsKnown: known})
		if err != nil {
			return "", nil, fmt.Errorf("deciding %s#%d@%s: %w", rc.Name, n, pr.Head.SHA, err)
		}
		if gate.NotGated(dec) {
			// The workflow does not ask about this push: nothing is decided,
			// a pin stays, and the PR is told once.
			return "not-gated", then(recordInfo, func(tx *state.Tx) error {
				return h.Gate.NotGatedPush(tx, dec, inst, d.ID)
			}), nil
		}
		return "decision-" + string(dec.Decision), recordInfo, nil
	case action == "closed" && pr.Merged:
		dec, err := h.Gate.Merged(ctx, gate.Ask{Repo: rc.Name, PR: n, SHA: pr.MergeCommitSHA, Action: action, Source: "webhook",
			DeliveryID: d.ID, Installation: inst, Labels: labels, LabelsKnown: known}, pr.Head.SHA)
		if err != nil {
			return "", nil, err
		}
		if dec == nil {
			return "merged", recordInfo, nil
		}
		return "merged-" + string(dec.Decision), recordInfo, nil
	case action == "closed":
		return "closed", func(tx *state.Tx) error {
			// A close stamped before the head or reopen opsbot recorded is
			// older than the PR's state (a captured delivery replayed after
			// retention forgot it): it changes nothing.
			if old, err := tx.PRInfo(rc.Name, n); err != nil {
				return err
			} else if old != nil && !pr.UpdatedAt.IsZero() && pr.UpdatedAt.Before(old.HeadAt) {
				h.Log.Info("an older close changes nothing", "repo", rc.Name, "pr", n, "updated_at", pr.UpdatedAt, "head_at", old.HeadAt)
				return nil
			}
			if err := recordInfo(tx); err != nil {
				return err
			}
			return h.Gate.Closed(tx, gate.Ask{Repo: rc.Name, PR: n, Action: action, Source: "webhook", DeliveryID: d.ID,
				Installation: inst}, ev.Sender.ID, ev.Sender.Login)
		}, nil
	}
	return "pr-" + action, recordInfo, nil
}

// rememberInstallation notes a repository's installation from a webhook
// in the clients, and returns the write that records it with the rest of
// the delivery's transaction (nil when the delivery names none).
func (h *Handler) rememberInstallation(repo string, id int64) state.Write {
	if !h.Clients.Remember(repo, id) {
		return nil
	}
	return func(tx *state.Tx) error { return tx.SetRepoInstallation(repo, id) }
}

// Done tells, at ingest, a delivery that needs no worker: a new comment
// with no command line, whose handling is only its seen mark (so recovery
// never runs it later). It returns the outcome and that write; ok false
// for every other delivery.
func Done(d *state.Delivery) (outcome string, w state.Write, ok bool) {
	if d.Event != EventComment || !d.NoCommands || d.CommentID == 0 {
		return "", nil, false
	}
	return "no-commands", processed(d.Repo, d.CommentID), true
}

// processed records that a comment's `created` delivery was handled with
// nothing to run, so neither a redelivery nor recovery runs it later.
func processed(repo string, commentID int64) state.Write {
	if commentID == 0 {
		return nil // stored before deliveries carried the comment id
	}
	return func(tx *state.Tx) error {
		_, err := tx.CommentSeen(repo, commentID)
		return err
	}
}

// noted records that opsbot saw a comment other than by its `created`
// delivery (an edit, a deletion): recovery never runs it, and a `created`
// delivery that comes after runs at most what the comment still says.
func noted(repo string, commentID int64, deleted bool) state.Write {
	return func(tx *state.Tx) error { return tx.NoteComment(repo, commentID, deleted) }
}

// takenBack narrows a `created` delivery's commands to those its comment
// still holds when an `edited` or `deleted` delivery of it was processed
// first (GitHub does not promise their order; a `created` answered 503 is
// sent again later; an operator redelivers): after a deletion none run,
// after an edit only those in the body GitHub has now (read again, since
// edits too may come out of order). What is left out is audited as not
// run. An error reading GitHub is returned: the delivery is tried again.
func (h *Handler) takenBack(ctx context.Context, rc *config.Repo, c *commands.Comment) error {
	if h.Marks == nil || c.Origin.ID == 0 {
		return nil
	}
	mark, err := h.Marks.CommentMark(rc.Name, c.Origin.ID)
	if err != nil {
		return err
	}
	c.Mark = mark
	switch mark {
	case state.MarkDeleted:
		c.Withdrawn, c.Commands = c.Commands, nil
		c.WithdrawnWhy = "the comment was deleted before opsbot processed its created webhook, which came late"
		return nil
	case state.MarkEdited:
	default:
		return nil
	}
	client, err := h.Clients.For(c.Installation)
	if err != nil {
		return worker.Permanent(err)
	}
	var gh CommentReader = client
	body, err := gh.CommentBody(ctx, rc.Name, c.Origin.ID)
	if errors.Is(err, ghclient.ErrNotFound) {
		c.Withdrawn, c.Commands = c.Commands, nil
		c.WithdrawnWhy = "the comment was edited and then deleted before opsbot processed its created webhook, which came late"
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading comment %d again, which was edited before its created webhook was processed: %w", c.Origin.ID, err)
	}
	now := map[string]int{}
	for _, cmd := range h.Commands.Parse(body, commands.Options{Repo: rc.Name, Host: h.Cfg.Get().WebHost()}) {
		now[strings.ToLower(cmd.Text)]++
	}
	var kept []commands.Command
	for _, cmd := range c.Commands {
		if k := strings.ToLower(cmd.Text); now[k] > 0 {
			now[k]--
			kept = append(kept, cmd)
			continue
		}
		c.Withdrawn = append(c.Withdrawn, cmd)
	}
	c.Commands = kept
	c.WithdrawnWhy = "the comment was edited before opsbot processed its created webhook, which came late, and no longer holds this command"
	return nil
}

// then runs a, then b (either may be nil).
func then(a, b state.Write) state.Write {
	return func(tx *state.Tx) error {
		for _, w := range []state.Write{a, b} {
			if w == nil {
				continue
			}
			if err := w(tx); err != nil {
				return err
			}
		}
		return nil
	}
}

// mergeInfo records what an event tells of a PR, keeping what it does not
// (the Slack thread).
func mergeInfo(tx *state.Tx, info *state.PRInfo) error {
	old, err := tx.PRInfo(info.Repo, info.PR)
	if err != nil {
		return err
	}
	if old == nil {
		return tx.PutPRInfo(info)
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&old.Title, info.Title)
	set(&old.Author, info.Author)
	set(&old.Branch, info.Branch)
	if info.HeadSHA != "" && !info.HeadAt.Before(old.HeadAt) {
		// A delivery stamped before the one that set the head is late: the
		// head never moves back. Equal stamps (one second) take the newer
		// delivery; the gate checks GitHub's head before using a pin anyway.
		old.HeadSHA, old.HeadAt = info.HeadSHA, info.HeadAt
	}
	set(&old.State, info.State)
	if info.LabelsKnown && !info.LabelsAt.Before(old.LabelsAt) {
		// Labels move both ways; a delivery stamped before the one that set
		// them is late and changes nothing.
		old.Labels, old.Draft, old.LabelsKnown, old.LabelsAt = info.Labels, info.Draft, true, info.LabelsAt
	}
	if info.Installation != 0 {
		old.Installation = info.Installation
	}
	return tx.PutPRInfo(old)
}
