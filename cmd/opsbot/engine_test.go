package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// quickWorkers gives up on a failing delivery after its six tries within
// milliseconds, so a wake-up that fails for good is dead-lettered at once.
func quickWorkers(o *worker.Options) {
	o.BaseBackoff, o.MaxBackoff = time.Millisecond, 2*time.Millisecond
}

// routeCheckRuns is GitHub's list of a commit's check runs.
const routeCheckRuns = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"

// deadLetters is how many deliveries the server gave up on.
func (w *world) deadLetters() int {
	n, _ := strconv.Atoi(w.Metrics()["opsbot_dead_letters"])
	return n
}

// prEvent sends the PR's event a webhook sends for action (one that changes
// nothing opsbot decides on, such as an assignment).
func (w *world) prEvent(action string) {
	w.T.Helper()
	p := payload(w.T, "pull_request", action)
	setPath(p, "repository.full_name", theRepo)
	p["number"] = thePR
	setPath(p, "pull_request.number", thePR)
	setPath(p, "pull_request.head.sha", w.GH.PRHead(theRepo, thePR))
	setPath(p, "pull_request.head.ref", "kimi-tune")
	w.SetLabels(p)
	w.Send("pull_request", p)
}

// A stage request's deadline fires after an event woke its sequence and
// the step found nothing to do: the step changed nothing, and the engine
// left the sequence due at its deadline (before, it stayed due at the
// event's time, and every later wake-up of that version was the same
// delivery, dropped as one seen before).
func TestAStageDeadlineFiresAfterAStepThatChangedNothing(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := clockedStageWorld(t, "      report_timeout: 2h\n", clock)
	w.Comment(maintainer, "/stage-results 31147925932")
	w.Settle()
	before := w.Wakeups()
	w.prEvent("assigned") // wakes the PR's sequences
	w.PassTime(clock, record.WakeGap)
	if w.Wakeups() == before {
		t.Fatal("the PR's event woke no sequence")
	}
	for _, r := range w.Replies() {
		if strings.Contains(r, "did not report within") {
			t.Fatalf("failed before its deadline: %s", r)
		}
	}
	w.PassTime(clock, 2*time.Hour)
	testkit.Eventually(t, "the request failed at its deadline", func() bool {
		return strings.Contains(strings.Join(w.Replies(), "\n"), "did not report within 2h0m0s")
	})
}

// holdKind is a kind of sequence a test command starts: it sets a
// deadline and no wake-up, and at its deadline edits its status comment.
const holdKind = "hold"

func holdSpec(now func() time.Time) commands.Spec {
	return commands.Spec{
		Name:   "hold",
		Verbs:  []commands.Verb{{Word: "/hold", Usage: "usage: /hold", Args: func(*commands.Command, []string, commands.Options) string { return "" }}},
		Access: func(rc *config.Repo) config.Access { return rc.Reuse.Access },
		Help: func(*config.Repo) commands.Help {
			return commands.Help{Rows: []commands.HelpRow{{Command: "`/hold`", What: "wait an hour", Who: "anyone allowed to pin"}}}
		},
		Handler: holdHandler{now},
	}
}

type holdHandler struct{ now func() time.Time }

func (h holdHandler) Prepare(_ context.Context, _ commands.Env, in commands.Invocation, _ commands.Line) commands.Result {
	s := record.Sequence{Kind: holdKind, Repo: in.Repo, PR: in.PR, Step: "holding", Deadline: h.now().Add(time.Hour), Data: json.RawMessage(`{}`)}
	status := plan.Comment{Repo: in.Repo, PR: in.PR, Installation: in.Installation, Kind: string(notices.KindReply), Body: "⏳ holding for an hour"}
	return commands.Result{Outcome: commands.Accepted, Reply: mdtext.Mention(in.Actor.Login) + " holding",
		Plan: plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: s, Status: &status}}}}
}

func holdSeqKind() seq.Kind {
	return seq.Kind{Name: holdKind,
		Wake: func(context.Context, *config.Repo, seq.Wakeup) (string, seq.Write, error) {
			return "", nil, fmt.Errorf("a hold has nothing to do before its deadline")
		},
		Expire: func(_ context.Context, _ *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
			next := *w.Seq
			next.Step, next.Done = "released", true
			edit := plan.Edit{Repo: next.Repo, PR: next.PR, Kind: string(notices.KindReply), Body: "✅ released at its deadline"}
			p := plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: next, Read: w.Seq.Version, Edit: &edit}}}
			t := (&notices.Notifier{Web: notices.Web("https://github.com")}).Teller()
			return "hold-released", func(tx record.Tx) error { return plan.Apply(tx, t, p) }, nil
		}}
}

// A kind that sets a deadline and no wake-up has it fired by the engine:
// the deadline is in the wake index, and the kind's Expire runs (before,
// the index held wake-up times only, and such a deadline never came).
func TestADeadlineWithoutAWakeupFires(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := newWorldOpts(t, worldOpts{Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
		d.Modules = []func(commands.Deps) commands.Module{func(commands.Deps) commands.Module {
			return commands.Module{Spec: holdSpec(clock.Now), Kinds: []seq.Kind{holdSeqKind()}}
		}}
	}})
	w.Comment(maintainer, "/hold")
	mustContain(t, "status", strings.Join(w.Replies(), "\n"), "⏳ holding for an hour")
	w.PassTime(clock, time.Hour+time.Second)
	testkit.Eventually(t, "the hold released at its deadline", func() bool {
		return strings.Contains(strings.Join(w.Replies(), "\n"), "✅ released at its deadline")
	})
}

// A merge whose wake-up failed for good (GitHub down longer than the
// worker's tries: the wake-up is dead-lettered) is woken again in the next
// retry window and goes on (before, that window's wake-up was the same
// delivery as the failed one, dropped as seen before: the merge never
// moved again, kept its pin and refused every new /merge-with-reuse).
func TestAWakeupThatFailedForGoodIsSentAgainNextWindow(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := newWorldOpts(t, worldOpts{Repo: "    merge:\n      min_role: write\n", Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery, d.Worker = clock.Now, 10*time.Millisecond, quickWorkers
		d.GitHub = func(o *ghclient.Options) { o.MaxTries = 1 }
	}})
	w.PendingChecks()
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
	w.GH.SetCheckRun(theRepo, sha("c1"), "sweep / benchmarks", "completed", "success")
	w.GH.Inject(routeCheckRuns, githubtest.Fault{Status: 502})
	dead := w.deadLetters()
	clock.Add(merge.Poll)
	testkit.Eventually(t, "the failing wake-up dead-lettered", func() bool { return w.deadLetters() > dead })
	w.GH.Heal(routeCheckRuns)
	if len(w.GH.Merges()) != 0 {
		t.Fatal("merged while GitHub failed")
	}
	w.PassTime(clock, seq.Retry)
	w.WaitStatus("the merge", "🎉 merged `c1c1c1c`")
}
