package gate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/internal/testrig"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const repo = testrig.Repo

type rig struct {
	g     *gate.Gate
	store *state.Store
	gh    *githubtest.Fake
	notes *notes
}

// notes records what the gate asks to tell.
type notes struct{ decided, closed, notGated int }

func (n *notes) Decided(tx record.Tx, d *state.Decision, p *state.Pin, inst int64) error {
	n.decided++
	return nil
}
func (n *notes) Reason(w record.Why) string { return notices.Reason(w) }
func (n *notes) PinClosed(tx record.Tx, p *state.Pin, inst int64, why string) error {
	n.closed++
	return nil
}
func (n *notes) NotGated(tx record.Tx, d *state.Decision, p *state.Pin, inst int64) error {
	n.notGated++
	return nil
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, state.Options{})
}

func newRigWith(t *testing.T, opt state.Options) *rig {
	t.Helper()
	tr := testrig.New(t, opt)
	n := &notes{}
	g := &gate.Gate{Cfg: config.NewLive(tr.Cfg), Store: tr.Store, Notifier: n, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Validators: func(int64) (*runs.Validator, error) { return &runs.Validator{GH: tr.Client}, nil }}
	return &rig{g: g, store: tr.Store, gh: tr.GH, notes: n}
}

func (r *rig) pin(t *testing.T, run int64, headAtGrant string) *state.Pin {
	t.Helper()
	p := &state.Pin{Repo: repo, PR: 1, RunID: run, RunSHA: "c1", PRHeadAtGrant: headAtGrant, ActorID: 7, ActorLogin: "maintainer"}
	if err := r.store.Update(func(tx *state.Tx) error {
		_, err := tx.Grant(p, state.PinChange{ActorID: 7, ActorLogin: "maintainer"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

func ask(sha, action string) gate.Ask {
	return gate.Ask{Repo: repo, PR: 1, SHA: sha, Action: action, Source: "api"}
}

func TestDecisions(t *testing.T) {
	ctx := context.Background()
	t.Run("other action answers sweep and stores nothing", func(t *testing.T) {
		r := newRig(t)
		r.pin(t, 10, "c1")
		d, err := r.g.Decide(ctx, ask("c2", "labeled"))
		if err != nil || d.Decision != state.Sweep || !strings.Contains(d.Reason, `"labeled" does not decide`) {
			t.Fatalf("%+v %v", d, err)
		}
		if stored, _ := r.store.Decision(repo, 1, "c2"); stored != nil {
			t.Fatal("stored a decision for a labeled ask")
		}
		if p, _ := r.store.ActivePin(repo, 1); p == nil {
			t.Fatal("a labeled ask used the pin")
		}
	})
	t.Run("no pin sweeps, once", func(t *testing.T) {
		r := newRig(t)
		d, err := r.g.Decide(ctx, ask("c2", "synchronize"))
		if err != nil || d.Decision != state.Sweep || d.Reason != "no reuse authorization" {
			t.Fatalf("%+v %v", d, err)
		}
		again, _ := r.g.Decide(ctx, ask("c2", "synchronize"))
		if !again.DecidedAt.Equal(d.DecidedAt) || r.notes.decided != 1 {
			t.Fatalf("asked twice: %d notices, %v vs %v", r.notes.decided, again.DecidedAt, d.DecidedAt)
		}
	})
	t.Run("pin consumed by the next push only", func(t *testing.T) {
		r := newRig(t)
		r.pin(t, 10, "c1")
		r.gh.Push(repo, 1, []string{"c2"})
		d, err := r.g.Decide(ctx, ask("c2", "synchronize"))
		if err != nil || d.Decision != state.Skip || d.RunID != 10 || d.ActorLogin != "maintainer" {
			t.Fatalf("%+v %v", d, err)
		}
		if p, _ := r.store.ActivePin(repo, 1); p != nil {
			t.Fatal("the pin is still active after its push")
		}
		r.gh.Push(repo, 1, []string{"c3"})
		d3, _ := r.g.Decide(ctx, ask("c3", "synchronize"))
		if d3.Decision != state.Sweep {
			t.Fatalf("the push after it: %+v", d3)
		}
	})
	t.Run("a commit that is no longer GitHub's head sweeps and leaves the pin", func(t *testing.T) {
		r := newRig(t)
		r.pin(t, 10, "c1")
		r.gh.Push(repo, 1, []string{"c2", "c3"})
		d, err := r.g.Decide(ctx, ask("C2", "synchronize"))
		if err != nil || d.Decision != state.Sweep || !strings.Contains(d.Reason, "no longer the head of PR #1 (GitHub says c3 is)") {
			t.Fatalf("%+v %v", d, err)
		}
		if p, _ := r.store.ActivePin(repo, 1); p == nil {
			t.Fatal("a commit that is not the head used up the pin")
		}
		if d3, _ := r.g.Decide(ctx, ask("c3", "synchronize")); d3.Decision != state.Skip {
			t.Fatalf("the head: %+v", d3)
		}
	})
	t.Run("head when pinned waits for the next push", func(t *testing.T) {
		r := newRig(t)
		r.pin(t, 10, "c2")
		r.gh.Push(repo, 1, []string{"c2"})
		d, _ := r.g.Decide(ctx, ask("c2", "synchronize"))
		if d.Decision != state.Sweep || !strings.Contains(d.Reason, "covers the next push") {
			t.Fatalf("%+v", d)
		}
		if p, _ := r.store.ActivePin(repo, 1); p == nil {
			t.Fatal("the pin was used by the head it was taken at")
		}
	})
	t.Run("rule failing at use makes the pin invalid", func(t *testing.T) {
		r := newRig(t)
		r.pin(t, 10, "c1")
		r.gh.ExpireArtifacts(repo, 10)
		r.gh.Push(repo, 1, []string{"c2"})
		d, _ := r.g.Decide(ctx, ask("c2", "synchronize"))
		if d.Decision != state.Sweep || !strings.Contains(d.Reason, "no longer qualifies") {
			t.Fatalf("%+v", d)
		}
		pins, _ := r.store.Pins(repo, 1)
		if len(pins) != 1 || pins[0].State != state.PinInvalid {
			t.Fatalf("pins = %+v", pins)
		}
	})
	t.Run("GitHub failing decides sweep", func(t *testing.T) {
		r := newRig(t)
		r.pin(t, 10, "c1")
		r.gh.Push(repo, 1, []string{"c2"})
		r.gh.Inject("GET /repos/{owner}/{repo}/actions/runs/{id}", githubtest.Fault{Status: 500})
		d, err := r.g.Decide(ctx, ask("c2", "synchronize"))
		if err != nil || d.Decision != state.Sweep || !strings.Contains(d.Reason, "could not be checked") {
			t.Fatalf("%+v %v", d, err)
		}
	})
	t.Run("unknown repository", func(t *testing.T) {
		r := newRig(t)
		if _, err := r.g.Decide(ctx, gate.Ask{Repo: "o/other", PR: 1, SHA: "c2", Action: "synchronize"}); err == nil {
			t.Fatal("decided for a repository not served")
		}
	})
}

func TestMergedConsumesThePin(t *testing.T) {
	r := newRig(t)
	r.pin(t, 10, "c1")
	d, err := r.g.Merged(context.Background(), gate.Ask{Repo: repo, PR: 1, SHA: "m1", Action: "closed", Source: "webhook"}, "c1")
	if err != nil || d == nil || d.Decision != state.Skip || !d.MergeOf || d.RunID != 10 {
		t.Fatalf("%+v %v", d, err)
	}
	if p, _ := r.store.ActivePin(repo, 1); p != nil {
		t.Fatal("the pin is still active after the merge")
	}
	if d, _ := r.g.Merged(context.Background(), gate.Ask{Repo: repo, PR: 1, SHA: "m1"}, "c1"); d != nil {
		t.Fatalf("a merge without a pin decided %+v", d)
	}
}

// A pin superseded while the run was checked: the head sweeps with that
// reason, and the newer pin waits for the next push.
func TestPinChangedWhileDecidingKeepsItsReason(t *testing.T) {
	r := newRig(t)
	r.pin(t, 10, "c1")
	r.gh.Push(repo, 1, []string{"c2"})
	validators := r.g.Validators
	r.g.Validators = func(inst int64) (*runs.Validator, error) {
		r.pin(t, 10, "c1") // a newer pin lands while the run is checked
		return validators(inst)
	}
	d, err := r.g.Decide(context.Background(), ask("c2", "synchronize"))
	if err != nil || d.Decision != state.Sweep {
		t.Fatalf("%+v %v", d, err)
	}
	if want := "the reuse authorization changed while this push was decided"; d.Reason != want {
		t.Fatalf("reason = %q, want %q", d.Reason, want)
	}
}

// retryingStore runs each write the way the group committer does when the
// shared commit fails: first in a transaction with another write queued
// ahead of it (here one that revokes the pin), which the disk then refuses
// (FailWrites), and again alone. The write must decide from what it reads
// in the transaction that commits, not from what an earlier run saw.
type retryingStore struct {
	*state.Store
	fail *atomic.Bool
	runs int
}

func (s *retryingStore) Update(w state.Write) error {
	s.fail.Store(true)
	err := s.Store.Update(func(tx *state.Tx) error {
		p, err := tx.ActivePin(repo, 1)
		if err != nil || p == nil {
			return err
		}
		if err := tx.Transition(p, state.PinRevoked, state.PinChange{Reason: "revoked by a write that is rolled back"}); err != nil {
			return err
		}
		s.runs++
		return w(tx)
	})
	if !errors.Is(err, errDiskFull) {
		return fmt.Errorf("the first commit should have failed: %v", err)
	}
	s.runs++
	return s.Store.Update(w)
}

var errDiskFull = errors.New("injected: disk full")

func TestDecisionRetriedAfterAFailedCommitDecidesAfresh(t *testing.T) {
	fail := &atomic.Bool{}
	r := newRigWith(t, state.Options{FailWrites: func() error {
		if fail.Swap(false) {
			return errDiskFull
		}
		return nil
	}})
	rs := &retryingStore{Store: r.store, fail: fail}
	r.g.Store = rs
	p := r.pin(t, 10, "c1")
	r.gh.Push(repo, 1, []string{"c2"})
	d, err := r.g.Decide(context.Background(), ask("c2", "synchronize"))
	if err != nil {
		t.Fatal(err)
	}
	if rs.runs != 2 {
		t.Fatalf("the decision's write ran %d times, want 2 (once rolled back, once committed)", rs.runs)
	}
	if d.Decision != state.Skip || d.PinID != p.ID || d.RunID != 10 {
		t.Fatalf("decision = %+v, want skip with pin %d: the revocation was rolled back", d, p.ID)
	}
	if cur, _ := r.store.ActivePin(repo, 1); cur != nil {
		t.Fatalf("pin %d is still active after the push it covered", cur.ID)
	}
}

// A final head whose push never reached opsbot is decided at the merge, and
// the merge then consumes nothing.
func TestMergedDecidesAFinalHeadNeverDecided(t *testing.T) {
	r := newRig(t)
	p := r.pin(t, 10, "c1")
	r.gh.Push(repo, 1, []string{"c2"}) // its synchronize is lost
	d, err := r.g.Merged(context.Background(), gate.Ask{Repo: repo, PR: 1, SHA: "m1", Action: "closed", Source: "webhook"}, "c2")
	if err != nil || d == nil || d.HeadSHA != "c2" || d.Decision != state.Skip || d.MergeOf || d.PinID != p.ID {
		t.Fatalf("%+v %v", d, err)
	}
	if m, _ := r.store.Decision(repo, 1, "m1"); m != nil {
		t.Fatalf("the merge commit was decided too: %+v", m)
	}
	pins, _ := r.store.Pins(repo, 1)
	if len(pins) != 1 || pins[0].State != state.PinConsumed || pins[0].ConsumedBy != "c2" {
		t.Fatalf("pins = %+v", pins)
	}
}

// At merge, a final head that does not contain the pinned run's commit
// (force-pushed without it) is not skipped even though GitHub's PR shows the
// run's commit again, and the reason says the head lacks it.
func TestMergedRefusesAFinalHeadWithoutTheRunsCommit(t *testing.T) {
	r := newRig(t)
	r.pin(t, 10, "c0")
	r.gh.ForcePush(repo, 1, []string{"d1"}, []string{"perf-changelog.yaml"})
	r.gh.ForcePush(repo, 1, []string{"c1", "d2"})
	d, err := r.g.Merged(context.Background(), gate.Ask{Repo: repo, PR: 1, SHA: "m1", Action: "closed", Source: "webhook"}, "d1")
	if err != nil || d == nil || d.HeadSHA != "d1" || d.Decision != state.Sweep || !strings.Contains(d.Reason, "does not contain run 10's commit `c1`") {
		t.Fatalf("%+v %v", d, err)
	}
}

// A rule failing for the PR's head makes the pin invalid; one failing for
// a commit that is no longer the head (it lacks the run's commit) leaves the
// pin for the head, which then skips.
func TestDivergedStaleCommitLeavesThePinForTheHead(t *testing.T) {
	r := newRig(t)
	r.pin(t, 10, "c0")
	r.gh.ForcePush(repo, 1, []string{"d1"}, []string{"perf-changelog.yaml"})
	r.gh.ForcePush(repo, 1, []string{"c1", "d2"})
	d, err := r.g.Decide(context.Background(), ask("d1", "synchronize"))
	if err != nil || d.Decision != state.Sweep || !strings.Contains(d.Reason, "does not contain run 10's commit `c1`") ||
		!strings.Contains(d.Reason, "left for the head") {
		t.Fatalf("%+v %v", d, err)
	}
	if d2, _ := r.g.Decide(context.Background(), ask("d2", "synchronize")); d2 == nil || d2.Decision != state.Skip {
		t.Fatalf("the head: %+v", d2)
	}
	r.gh.ForcePush(repo, 1, []string{"e1"})
	r.pin(t, 10, "d2")
	if d, _ := r.g.Decide(context.Background(), ask("e1", "synchronize")); d == nil || d.Decision != state.Sweep {
		t.Fatalf("a head without the run's commit: %+v", d)
	} else if p, _ := r.store.ActivePin(repo, 1); p != nil {
		t.Fatalf("a rule failing for the head left pin %d active", p.ID)
	}
}

// A PR closed without merging expires its pin once, audits who closed it,
// and tells the PR; a closed PR without a pin changes nothing.
func TestClosedExpiresThePin(t *testing.T) {
	r := newRig(t)
	p := r.pin(t, 10, "c1")
	closeIt := func() error {
		return r.store.Update(func(tx *state.Tx) error {
			return r.g.Closed(tx, gate.Ask{Repo: repo, PR: 1, Action: "closed", Source: "webhook"}, 99, "author")
		})
	}
	if err := closeIt(); err != nil {
		t.Fatal(err)
	}
	pins, err := r.store.Pins(repo, 1)
	if err != nil || len(pins) != 1 || pins[0].State != state.PinExpired || pins[0].ClosedReason != "the PR was closed without merging" {
		t.Fatalf("pins = %+v, %v; want pin %d expired", pins, err, p.ID)
	}
	recs, _, err := r.store.Audit(state.AuditQuery{Kind: "pin"})
	if err != nil || len(recs) != 2 || recs[1].Outcome != "expired" || recs[1].ActorLogin != "author" || recs[1].PinID != p.ID {
		t.Fatalf("pin audit = %+v, %v; want the expiry by @author last", recs, err)
	}
	if r.notes.closed != 1 {
		t.Fatalf("PinClosed told %d times, want 1", r.notes.closed)
	}
	if err := closeIt(); err != nil {
		t.Fatal(err)
	}
	if r.notes.closed != 1 {
		t.Fatalf("closing a PR without a pin told the PR again (%d)", r.notes.closed)
	}
}

// A value keeps to one line and spells no workflow command, yet an IPv6
// address in a URL reads as itself in the gate's errors.
func TestOneLineKeepsAddressesAndNoCommand(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://[::1]:9/api/v1/gate": dial tcp [::1]:9: connect: connection refused`: `Post "http://[::1]:9/api/v1/gate": dial tcp [::1]:9: connect: connection refused`,
		"[fe80::1%eth0]:80 and a::add-mask::b":                                             "[fe80::1%eth0]:80 and a: :add-mask: :b",
		"x\n::error::y":                                                                    "x : :error: :y",
		"##[set-env name=X;]x":                                                             "# #[set-env name=X;]x",
		"##[::1]":                                                                          "# #[: :1]",
		"[::error::]":                                                                      "[: :error: :]",
		":::warning::[::1]::debug::":                                                       ": : :warning: :[::1]: :debug: :",
	} {
		got := gate.OneLine(in)
		if got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "##[") || strings.ContainsAny(got, "\r\n") {
			t.Errorf("OneLine(%q) = %q holds a command or a line break", in, got)
		}
	}
}
