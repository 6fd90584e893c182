package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testrig"
	"github.com/SemiAnalysisAI/opsbot/reconcile"
	"github.com/SemiAnalysisAI/opsbot/state"
)

const (
	repo     = testrig.Repo
	reactRt  = "GET /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	timeline = "GET /repos/{owner}/{repo}/issues/{n}/timeline"
	command  = "/reuse-sweep-run 10"
)

// t0 is when each reconcile runs; the last one ran half an hour before, so
// the window starts at t0-90m.
var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// queue records the deliveries reconciling queues.
type queue struct{ got []*state.Delivery }

func (q *queue) Enqueue(d *state.Delivery) { q.got = append(q.got, d) }

var _ events.Queue = (*queue)(nil)

// rig is one repository (testrig: PR 1 at head c1, run 10 of c1) whose
// webhooks were lost, on a fake GitHub whose clock and opsbot's are set by
// the test.
type rig struct {
	*testrig.Rig
	now   time.Time
	queue *queue
	rec   *reconcile.Reconciler
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{now: t0.Add(-2 * time.Hour), queue: &queue{}}
	clock := func() time.Time { return r.now }
	r.Rig = testrig.New(t, state.Options{Now: clock})
	r.GH.SetNow(clock)
	r.GH.AddUser("maintainer", 7, "User")
	run := testrig.SweepRun(10, "c1") // run 10 of c1 was made before any comment
	run.CreatedAt = r.now
	r.GH.AddRun(repo, run)
	r.rec = &reconcile.Reconciler{Cfg: config.NewLive(r.Cfg), Store: r.Store, Queue: r.queue,
		Clients:  func(string) (reconcile.Reader, error) { return r.Client, nil },
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return t0 },
		SelfID:   githubtest.BotID,
		Commands: commandstest.Registry()}
	return r
}

// at runs fn with the fake's clock at t.
func (r *rig) at(t time.Time, fn func()) {
	r.now = t
	fn()
}

// post writes a comment on PR 1 at t, its webhook lost.
func (r *rig) post(t time.Time, login, body string) int64 {
	var c githubtest.Comment
	r.at(t, func() { c = r.GH.AddComment(repo, 1, login, body) })
	return c.ID
}

// notFirst records a reconcile half an hour before t0.
func (r *rig) notFirst(t *testing.T) {
	t.Helper()
	if err := r.Store.SetReconciledAt(repo, t0.Add(-30*time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// recoveryAudit is the `recovery` audit of one comment, as "outcome: reason".
func (r *rig) recoveryAudit(t *testing.T, id int64) []string {
	t.Helper()
	recs, _, err := r.Store.Audit(state.AuditQuery{Kind: "recovery"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range recs {
		if a.CommentID == id {
			out = append(out, a.Outcome+": "+a.Reason)
		}
	}
	return out
}

// what reconcile did with the comment, read from its report.
func what(rep reconcile.Report, id int64) string {
	for name, list := range map[string][]int64{"recovered": rep.CommandsRecovered, "recorded": rep.CommandsRecorded,
		"not_run": rep.CommandsNotRun, "pending": rep.CommandsPending} {
		if slices.Contains(list, id) {
			return name
		}
	}
	return "nothing"
}

// Each reason reconcile does not run a recovered command comment, and the
// one way it does: the report lists the comment, the audit (kind
// `recovery`) says why, and the comment's mark is what keeps a later
// `created` delivery from running it, or lets it.
func TestRunDecidesEachLostCommand(t *testing.T) {
	posted := t0.Add(-10 * time.Minute)
	for _, tc := range []struct {
		name string
		// setup prepares the world and returns the comment reconcile finds.
		setup  func(t *testing.T, r *rig) int64
		replay time.Time
		want   string // the report's list: recovered, recorded, not_run, pending, nothing
		// why is in the comment's `recovery` audit record; "" wants none.
		why  string
		mark state.CommentMark // the comment's mark afterwards
	}{
		{name: "nothing changed since: recovered",
			setup: func(t *testing.T, r *rig) int64 { r.notFirst(t); return r.post(posted, "maintainer", command) },
			want:  "recovered", mark: state.MarkNone},
		{name: "first reconcile of the repository",
			setup: func(t *testing.T, r *rig) int64 { return r.post(posted, "maintainer", command) },
			want:  "recorded", why: "recorded: the first reconcile of this repository records the command comments it finds", mark: state.MarkProcessed},
		{name: "first reconcile asked to replay",
			setup:  func(t *testing.T, r *rig) int64 { return r.post(posted, "maintainer", command) },
			replay: t0.Add(-time.Hour), want: "recovered", mark: state.MarkNone},
		{name: "edited after it was posted",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", "Looking at it.")
				r.at(posted.Add(time.Minute), func() { r.GH.EditComment(id, command) })
				return id
			},
			want: "not_run", why: "not_run: the comment was edited after it was posted", mark: state.MarkProcessed},
		{name: "posted before the window",
			// GitHub's since is whole seconds: a comment in the second the
			// window starts in, before its start, is listed.
			setup: func(t *testing.T, r *rig) int64 {
				return r.post(t0.Add(-time.Hour+200*time.Millisecond), "maintainer", command)
			},
			replay: t0.Add(-time.Hour + 500*time.Millisecond),
			want:   "not_run", why: "not_run: the comment was posted at 2026-05-04T11:00:00Z, before the recovery window", mark: state.MarkProcessed},
		{name: "already answered: opsbot's reaction is on it",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.GH.AddReaction(repo, id, githubtest.BotLogin, "+1")
				return id
			},
			want: "not_run", why: "not_run: opsbot already answered the comment (its reaction is on it)", mark: state.MarkProcessed},
		{name: "opsbot's own account unknown",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				r.rec.SelfID = 0
				return r.post(posted, "maintainer", command)
			},
			want: "not_run", why: "not_run: opsbot's own account is not known, so whether it already answered the comment cannot be read",
			mark: state.MarkNone}, // left to its created webhook, and the next reconcile
		{name: "reactions unreadable",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				r.GH.Inject(reactRt, githubtest.Fault{Status: 404, Times: 1})
				return r.post(posted, "maintainer", command)
			},
			want: "not_run", why: "not_run: whether opsbot already answered the comment could not be read", mark: state.MarkNone},
		{name: "timeline unreadable",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				r.GH.Inject(timeline, githubtest.Fault{Status: 404, Times: 1})
				return r.post(posted, "maintainer", command)
			},
			want: "not_run", why: "not_run: what became of PR #1 since the comment was posted could not be read", mark: state.MarkNone},
		{name: "posted while the PR was closed",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				r.at(posted.Add(-time.Minute), func() { r.GH.ClosePR(repo, 1, false, "") })
				id := r.post(posted, "maintainer", command)
				r.at(posted.Add(time.Minute), func() { r.GH.ReopenPR(repo, 1) })
				return id
			},
			want: "not_run", why: "not_run: PR #1 was closed when the comment was posted (2026-05-04T11:50:00Z)", mark: state.MarkProcessed},
		{name: "closed and reopened since",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.at(posted.Add(time.Minute), func() { r.GH.ClosePR(repo, 1, false, "") })
				r.at(posted.Add(2*time.Minute), func() { r.GH.ReopenPR(repo, 1) })
				return id
			},
			want: "not_run", why: "not_run: PR #1 was closed at 2026-05-04T11:51:00Z, after the comment was posted", mark: state.MarkProcessed},
		{name: "retargeted since",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.at(posted.Add(time.Minute), func() { r.GH.Retarget(repo, 1, "release") })
				return id
			},
			want: "not_run", why: "not_run: PR #1 was retargeted to another base branch at", mark: state.MarkProcessed},
		{name: "closed now, the timeline silent",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.at(posted.Add(time.Minute), func() { r.GH.ClosePR(repo, 1, false, "") })
				r.GH.Inject(timeline, githubtest.Fault{Status: 200, Body: "[]", Times: 1})
				return id
			},
			want: "not_run", why: "not_run: PR #1 is closed now: commands are recovered only on open PRs", mark: state.MarkProcessed},
		{name: "opsbot saw the head move since",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.GH.Push(repo, 1, []string{"c2"})
				if err := r.Store.Update(func(tx *state.Tx) error {
					return tx.PutPRInfo(&state.PRInfo{Repo: repo, PR: 1, HeadSHA: "c2", HeadAt: posted.Add(time.Minute)})
				}); err != nil {
					t.Fatal(err)
				}
				return id
			},
			want: "not_run", why: "not_run: opsbot saw PR #1's head move to c2 at 2026-05-04T11:51:00Z", mark: state.MarkProcessed},
		{name: "a run of the head made since",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.GH.Push(repo, 1, []string{"c2"})
				run := testrig.SweepRun(11, "c2")
				run.CreatedAt = posted.Add(time.Minute)
				r.GH.AddRun(repo, run)
				return id
			},
			want: "not_run", why: "not_run: run 11 of PR #1's head c2 was made at 2026-05-04T11:51:00Z", mark: state.MarkProcessed},
		{name: "a run in the same second as the comment",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted.Add(300*time.Millisecond), "maintainer", command)
				r.GH.Push(repo, 1, []string{"c2"})
				run := testrig.SweepRun(11, "c2")
				run.CreatedAt = posted
				r.GH.AddRun(repo, run)
				return id
			},
			want: "not_run", why: "not_run: run 11 of PR #1's head c2 was made at 2026-05-04T11:50:00Z", mark: state.MarkProcessed},
		{name: "nothing shows the head was the head then",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				r.GH.Push(repo, 1, []string{"c2"})
				return id
			},
			want: "not_run", why: "not_run: nothing shows that c2, PR #1's head now, was its head when the comment was posted", mark: state.MarkProcessed},
		{name: "its created delivery is waiting in the inbox",
			setup: func(t *testing.T, r *rig) int64 {
				id := r.post(posted, "maintainer", command)
				if _, err := r.Store.Append(context.Background(), &state.Delivery{ID: "d-1", Event: events.EventComment, Action: "created",
					Repo: repo, PR: 1, CommentID: id, ReceivedAt: posted, Body: []byte(`{}`)}); err != nil {
					t.Fatal(err)
				}
				return id
			},
			want: "pending", mark: state.MarkNone},
		{name: "seen before",
			setup: func(t *testing.T, r *rig) int64 {
				r.notFirst(t)
				id := r.post(posted, "maintainer", command)
				if err := r.Store.Update(func(tx *state.Tx) error { return tx.NoteComment(repo, id, true) }); err != nil {
					t.Fatal(err)
				}
				return id
			},
			want: "nothing", mark: state.MarkDeleted},
		{name: "opsbot's own comment",
			setup: func(t *testing.T, r *rig) int64 { r.notFirst(t); return r.post(posted, githubtest.BotLogin, command) },
			want:  "nothing", mark: state.MarkProcessed},
		{name: "no command in it",
			setup: func(t *testing.T, r *rig) int64 { r.notFirst(t); return r.post(posted, "maintainer", "Looks good.") },
			want:  "nothing", mark: state.MarkProcessed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			id := tc.setup(t, r)
			rep, err := r.rec.Run(context.Background(), repo, tc.replay)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := what(rep, id); got != tc.want {
				t.Fatalf("comment %d was %s, want %s; report %+v", id, got, tc.want, rep)
			}
			audit := r.recoveryAudit(t, id)
			switch {
			case tc.why == "" && len(audit) != 0:
				t.Errorf("recovery audit = %q, want none", audit)
			case tc.why != "" && (len(audit) != 1 || !strings.HasPrefix(audit[0], tc.why)):
				t.Errorf("recovery audit = %q, want one record starting %q", audit, tc.why)
			}
			if m, err := r.Store.CommentMark(repo, id); err != nil || m != tc.mark {
				t.Errorf("comment mark = %v, %v; want %v", m, err, tc.mark)
			}
			queued := slices.ContainsFunc(r.queue.got, func(d *state.Delivery) bool {
				return d.ID == fmt.Sprintf("%scomment-%d", reconcile.IDPrefix, id)
			})
			if queued != (tc.want == "recovered") {
				t.Errorf("recovery's delivery of the comment queued = %v, want %v", queued, !queued)
			}
			last, err := r.Store.ReconciledAt(repo)
			if err != nil || !last.Equal(t0) {
				t.Errorf("reconciled at %v, %v; want %v", last, err, t0)
			}
		})
	}
}

// A first reconcile also says, once, how many comments it recorded; a
// second runs as any other.
func TestFirstReconcileSaysWhatItRecorded(t *testing.T) {
	r := newRig(t)
	r.post(t0.Add(-10*time.Minute), "maintainer", command)
	r.post(t0.Add(-9*time.Minute), "maintainer", "Thanks!")
	rep, err := r.rec.Run(context.Background(), repo, time.Time{})
	if err != nil || !rep.First || rep.CommentsChecked != 2 || !rep.Since.Equal(t0.Add(-7*24*time.Hour)) {
		t.Fatalf("Run = %+v, %v; want a first reconcile over a week checking 2 comments", rep, err)
	}
	summary := r.recoveryAudit(t, 0)
	if len(summary) != 1 || !strings.HasPrefix(summary[0], "recorded: the first reconcile of this repository on this database recorded the 2 comments") {
		t.Fatalf("summary = %q", summary)
	}
	rep, err = r.rec.Run(context.Background(), repo, time.Time{})
	if err != nil || rep.First || !rep.Since.Equal(t0.Add(-reconcile.Overlap)) || len(rep.CommandsRecovered)+len(rep.CommandsNotRun) != 0 {
		t.Fatalf("second Run = %+v, %v; want a window from an hour before the first, running nothing again", rep, err)
	}
}

// What reconcile refuses before it reads anything.
func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		repo   string
		replay time.Time
		noReg  bool
		want   error
		msg    string
	}{
		{name: "replay from the future", repo: repo, replay: t0.Add(time.Minute), want: reconcile.ErrReplayInFuture},
		{name: "replay from past 72h", repo: repo, replay: t0.Add(-73 * time.Hour), want: reconcile.ErrReplayTooOld,
			msg: "replay from 2026-05-01T12:00:00Z or later"},
		{name: "a repository not served", repo: "someone/else", msg: "someone/else is not served by this opsbot"},
		{name: "no command registry", repo: repo, noReg: true, msg: "no command registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			if tc.noReg {
				r.rec.Commands = nil
			}
			before := r.GH.Count("")
			_, err := r.rec.Run(context.Background(), tc.repo, tc.replay)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Run = %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if n := r.GH.Count("") - before; n != 0 {
				t.Fatalf("a refused reconcile made %d GitHub requests", n)
			}
			if last, _ := r.Store.ReconciledAt(repo); !last.IsZero() {
				t.Fatalf("a refused reconcile stamped the repository at %v", last)
			}
		})
	}
}
