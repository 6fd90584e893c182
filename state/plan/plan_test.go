package plan_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const repo = "acme/bench"

// teller enqueues the notices as the outbox would get them, with no mirror.
type teller struct{}

func (teller) Comment(tx record.Tx, c plan.Comment) (uint64, error) {
	n := &record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeComment, Repo: c.Repo, PR: c.PR, Body: c.Body}
	err := tx.Enqueue(n)
	return n.ID, err
}

func (teller) Edit(tx record.Tx, e plan.Edit) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeEdit, Repo: e.Repo, PR: e.PR, EditOf: e.Of, Body: e.Body})
}

func (teller) React(tx record.Tx, repo string, pr int, _ int64, commentID int64, content string) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeReaction, Repo: repo, PR: pr, TargetComment: commentID,
		Reaction: content})
}

func (teller) OfferSlack(record.Tx, plan.SlackOffer) error { return nil }
func (teller) OfferCheck(record.Tx, plan.CheckOffer) error { return nil }

func (teller) StageUnstaged(tx record.Tx, prev, by record.StageRequest) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeComment, Repo: prev.Repo, PR: prev.PR, Body: "unstaged"})
}

func (teller) StageReplaced(tx record.Tx, old, by record.StageRequest) error {
	return tx.Enqueue(&record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeEdit, Repo: old.Repo, PR: old.PR, EditOf: old.AckNotice,
		Body: "replaced"})
}

func (teller) Dispatch(tx record.Tx, d plan.Dispatch) (uint64, error) {
	n := &record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeDispatch, Repo: d.ToRepo, PR: d.PR, EventType: d.EventType}
	err := tx.Enqueue(n)
	return n.ID, err
}

// stores are the transactions a plan is applied on: the store's (bbolt)
// and the one in memory handlers' tests use. Each runs fn in one
// transaction that commits only when fn returns nil.
func stores(t *testing.T) map[string]func(fn func(tx record.Tx) error) error {
	st, err := state.Open(filepath.Join(t.TempDir(), "plan.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mem := &commandstest.Tx{}
	return map[string]func(fn func(tx record.Tx) error) error{
		"store": func(fn func(tx record.Tx) error) error {
			return st.Update(func(tx *state.Tx) error { return fn(tx) })
		},
		"memory": func(fn func(tx record.Tx) error) error {
			// commandstest.Tx has no rollback: fn is tried on a copy first.
			trial := mem.Clone()
			if err := fn(trial); err != nil {
				return err
			}
			*mem = *trial
			return nil
		},
	}
}

func active(t *testing.T, update func(fn func(tx record.Tx) error) error) *record.Pin {
	t.Helper()
	var p *record.Pin
	if err := update(func(tx record.Tx) error {
		var err error
		p, err = tx.ActivePin(repo, 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// A plan made on a pin that is no longer the PR's active one is stale:
// nothing of it is written. The same plan applied again (a retried
// commit) does the same thing, since it holds values only.
func TestApplyChecksItsFactsAndRepeats(t *testing.T) {
	for name, update := range stores(t) {
		t.Run(name, func(t *testing.T) {
			grant := plan.Plan{Require: []plan.Fact{plan.ActivePin{Repo: repo, PR: 1}},
				Steps: []plan.Step{plan.GrantPin{Pin: record.Pin{Repo: repo, PR: 1, RunID: 10, ActorLogin: "maintainer"}}}}
			for range 2 { // the first try's commit is lost; the plan is applied again
				err := update(func(tx record.Tx) error {
					if err := plan.Apply(tx, teller{}, grant); err != nil {
						return err
					}
					return errors.New("commit lost")
				})
				if err == nil || errors.Is(err, plan.ErrStale) {
					t.Fatalf("apply = %v", err)
				}
			}
			if err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, grant) }); err != nil {
				t.Fatal(err)
			}
			p := active(t, update)
			if p == nil || p.RunID != 10 {
				t.Fatalf("active pin %+v", p)
			}
			if g := grant.Steps[0].(plan.GrantPin); g.Pin.ID != 0 || g.Pin.State != "" {
				t.Fatalf("applying changed the plan's pin: %+v", g.Pin)
			}
			// Made when the PR had no pin: stale now, and writes nothing.
			err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, grant) })
			if !errors.Is(err, plan.ErrStale) {
				t.Fatalf("a second grant on the old fact = %v, want ErrStale", err)
			}
			if q := active(t, update); q == nil || q.ID != p.ID {
				t.Fatalf("active pin after a stale plan %+v, want %d", q, p.ID)
			}
			// A plan made on the pin as it is revokes it; made on it again, it is stale.
			revoke := plan.Plan{Require: []plan.Fact{plan.ActivePin{Repo: repo, PR: 1, ID: p.ID}},
				Steps: []plan.Step{plan.ClosePin{Pin: *p, To: record.PinRevoked, Change: record.PinChange{Reason: "cancelled"}}}}
			if err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, revoke) }); err != nil {
				t.Fatal(err)
			}
			if q := active(t, update); q != nil {
				t.Fatalf("active pin after revoking %+v", q)
			}
			if err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, revoke) }); !errors.Is(err, plan.ErrStale) {
				t.Fatalf("revoking again = %v, want ErrStale", err)
			}
		})
	}
}

// A stage request is made once per comment: a second line of the same
// comment changes nothing, in the same transaction or a later one. In a
// shared slot, a request replaces those the transaction finds waiting
// (whatever the plan's author saw), and each is told; taking a request
// back withdraws its dispatch while the outbox holds it, and does nothing
// once the request no longer waits.
func TestStageSteps(t *testing.T) {
	for name, update := range stores(t) {
		t.Run(name, func(t *testing.T) {
			req := func(comment int64) plan.RequestStage {
				return plan.RequestStage{Shared: true,
					Request:  record.StageRequest{Repo: repo, PR: 1, RunID: comment, State: record.StageRequested, OriginRef: record.OriginRef{CommentID: comment}},
					Ack:      plan.Comment{Repo: repo, PR: 1, Body: "staging"},
					Dispatch: plan.Dispatch{FromRepo: repo, PR: 1, ToRepo: "acme/site", EventType: "stage"},
					Audit:    record.AuditRecord{Kind: record.AuditStage, Repo: repo, Outcome: string(record.StageRequested)}}
			}
			apply := func(steps ...plan.Step) error {
				return update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, plan.Plan{Steps: steps}) })
			}
			var queue []record.StageRequest
			read := func() {
				t.Helper()
				if err := update(func(tx record.Tx) error {
					var err error
					queue, err = tx.StageRequests(repo)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			first := req(100)
			if err := apply(first, first); err != nil { // two lines of one comment
				t.Fatal(err)
			}
			if err := apply(first); err != nil { // the same plan again
				t.Fatal(err)
			}
			read()
			if len(queue) != 1 || queue[0].AckNotice == 0 || queue[0].DispatchNotice == 0 || queue[0].State != record.StageRequested {
				t.Fatalf("queue %+v", queue)
			}
			if err := apply(req(200)); err != nil {
				t.Fatal(err)
			}
			read()
			if len(queue) != 2 || queue[0].State != record.StageReplaced || queue[1].State != record.StageRequested {
				t.Fatalf("queue %+v", queue)
			}
			// The replaced request's dispatch, not yet sent, was withdrawn with it.
			var still bool
			if err := update(func(tx record.Tx) error {
				var err error
				still, err = tx.Withdraw(queue[0].DispatchNotice)
				return err
			}); err != nil || still {
				t.Fatalf("the replaced request's dispatch was still queued (%v, %v)", still, err)
			}

			withdraw := plan.WithdrawStage{Request: queue[1], Allowed: true,
				Cancelled: record.AuditRecord{Kind: record.AuditStage, Outcome: string(record.StageCancelled)},
				Sent:      record.AuditRecord{Kind: record.AuditStage, Outcome: "not_cancelled"}}
			if err := apply(withdraw); err != nil {
				t.Fatal(err)
			}
			read()
			if queue[1].State != record.StageCancelled {
				t.Fatalf("withdrawn request %+v", queue[1])
			}
			// The replaced one no longer waits: taking it back does nothing.
			if err := apply(plan.WithdrawStage{Request: queue[0], Allowed: true}); err != nil {
				t.Fatal(err)
			}
			read()
			if queue[0].State != record.StageReplaced {
				t.Fatalf("replaced request %+v", queue[0])
			}
		})
	}
}

// Once ends the plan that holds it when its comment was processed before,
// and only that plan; a Fail after it then fails nothing, so a comment
// processed before completes whatever its second preparation failed on.
func TestOnceEndsItsOwnPlan(t *testing.T) {
	for name, update := range stores(t) {
		t.Run(name, func(t *testing.T) {
			audit := func(why string) plan.Audit {
				return plan.Audit{Record: record.AuditRecord{Kind: record.AuditCommand, Repo: repo, Reason: why}}
			}
			comment := plan.Plan{Steps: []plan.Step{plan.Once{Repo: repo, CommentID: 7}, audit("first"), plan.Fail{Err: errors.New("GitHub 502")}}}
			if err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, comment) }); err == nil {
				t.Fatal("a Fail after a first Once wrote")
			}
			first := plan.Plan{Steps: []plan.Step{plan.Once{Repo: repo, CommentID: 7}, audit("first")}}
			if err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, first) }); err != nil {
				t.Fatal(err)
			}
			if err := update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, comment) }); err != nil {
				t.Fatalf("a processed comment whose preparation failed: %v, want nothing written", err)
			}
		})
	}
}

// A Once inside a nested plan ends that plan alone: the steps after it in
// the plan around it are still written.
func TestOnceInANestedPlan(t *testing.T) {
	tx := &commandstest.Tx{}
	audit := func(why string) plan.Audit {
		return plan.Audit{Record: record.AuditRecord{Kind: record.AuditCommand, Reason: why}}
	}
	if _, err := tx.CommentSeen(repo, 7); err != nil {
		t.Fatal(err)
	}
	outer := plan.Plan{Steps: []plan.Step{audit("before"), plan.Plan{Steps: []plan.Step{plan.Once{Repo: repo, CommentID: 7}, audit("never")}},
		audit("after")}}
	if err := plan.Apply(tx, teller{}, outer); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range tx.Records {
		got = append(got, r.Reason)
	}
	if strings.Join(got, ",") != "before,after" {
		t.Fatalf("audited %v, want before, after", got)
	}
}

// Reports of the staging side: a success in the shared slot takes it from
// the run staged before (A, then B, then C: each takes it from the one
// before, which becomes unstaged), and a report made on a request that was
// replaced since is stale and changes nothing.
func TestReportStage(t *testing.T) {
	for name, update := range stores(t) {
		t.Run(name, func(t *testing.T) {
			apply := func(steps ...plan.Step) error {
				return update(func(tx record.Tx) error { return plan.Apply(tx, teller{}, plan.Plan{Steps: steps}) })
			}
			request := func(comment int64, shared bool) record.StageRequest {
				t.Helper()
				if err := apply(plan.RequestStage{Shared: shared,
					Request:  record.StageRequest{Repo: repo, PR: int(comment), RunID: comment, State: record.StageRequested, OriginRef: record.OriginRef{CommentID: comment}},
					Dispatch: plan.Dispatch{ToRepo: "acme/site"}}); err != nil {
					t.Fatal(err)
				}
				var r *record.StageRequest
				if err := update(func(tx record.Tx) error {
					var err error
					r, err = tx.StageRequestByComment(repo, comment)
					return err
				}); err != nil || r == nil {
					t.Fatalf("request %d: %+v, %v", comment, r, err)
				}
				return *r
			}
			staged := func(r record.StageRequest) plan.ReportStage {
				done := r
				done.State, done.URL = record.StageStaged, "https://staging.example.com/"
				return plan.ReportStage{Request: done, From: r.State, TakesSlot: true,
					Audit: record.AuditRecord{Kind: record.AuditCallback, Repo: repo, Outcome: string(record.StageStaged)}}
			}
			states := func() map[int64]record.StageState {
				t.Helper()
				out := map[int64]record.StageState{}
				if err := update(func(tx record.Tx) error {
					q, err := tx.StageRequests(repo)
					for _, r := range q {
						out[r.CommentID] = r.State
					}
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			holder := func() int64 {
				t.Helper()
				var h *record.StageRequest
				if err := update(func(tx record.Tx) error {
					var err error
					h, err = tx.SlotHolder(repo)
					return err
				}); err != nil || h == nil {
					t.Fatalf("slot holder %+v, %v", h, err)
				}
				return h.CommentID
			}
			for _, c := range []int64{1, 2, 3} {
				// Each is requested once the one before is staged (so none replaces another).
				if err := apply(staged(request(c, false))); err != nil {
					t.Fatal(err)
				}
				if got := holder(); got != c {
					t.Fatalf("after %d was staged the slot holder is %d", c, got)
				}
			}
			if got := states(); got[1] != record.StageUnstaged || got[2] != record.StageUnstaged || got[3] != record.StageStaged {
				t.Fatalf("states %v, want 1 and 2 unstaged, 3 staged", got)
			}
			// A report planned on request 4, which request 5 then replaces: stale, and 4 stays replaced.
			four := request(4, false)
			request(5, true)
			if err := apply(staged(four)); !errors.Is(err, plan.ErrStale) {
				t.Fatalf("a report on a replaced request = %v, want ErrStale", err)
			}
			if got := states(); got[4] != record.StageReplaced || got[3] != record.StageStaged || holder() != 3 {
				t.Fatalf("after a stale report: states %v, holder %d", got, holder())
			}
		})
	}
}

// A stage request whose report did not come in time is failed, as the
// transaction finds it: its dispatch, still in the outbox, is withdrawn and
// the PR told it was never sent; a request reported on meanwhile is left.
func TestExpireStage(t *testing.T) {
	tx := &commandstest.Tx{}
	d := &record.Notice{Channel: record.ChannelGitHub, Kind: record.NoticeDispatch, Repo: "o/r", PR: 1}
	if err := tx.Enqueue(d); err != nil {
		t.Fatal(err)
	}
	req := record.StageRequest{Repo: "o/r", PR: 1, RunID: 9, State: record.StageRequested, DispatchNotice: d.ID, OriginRef: record.OriginRef{CommentID: 77}}
	if err := tx.AddStageRequest(&req); err != nil {
		t.Fatal(err)
	}
	step := plan.ExpireStage{Request: req, Told: plan.Edit{Repo: "o/r", PR: 1, Of: 5, Body: "no report"},
		NeverSent: plan.Edit{Repo: "o/r", PR: 1, Of: 5, Body: "never sent"},
		Audit:     record.AuditRecord{Kind: record.AuditStage, Outcome: string(record.StageFailed), Repo: "o/r", PR: 1}}
	if err := plan.Apply(tx, teller{}, plan.Plan{Steps: []plan.Step{step}}); err != nil {
		t.Fatal(err)
	}
	got, _ := tx.StageRequestByComment("o/r", 77)
	if got.State != record.StageFailed {
		t.Fatalf("state = %s", got.State)
	}
	for _, n := range tx.Notices {
		if n.Kind == record.NoticeDispatch {
			t.Fatalf("the dispatch was not withdrawn: %+v", tx.Notices)
		}
	}
	if len(tx.Notices) != 1 || tx.Notices[0].Body != "never sent" {
		t.Fatalf("told %+v, want the never-sent edit", tx.Notices)
	}
	if len(tx.Records) != 1 || tx.Records[0].Outcome != "failed" {
		t.Fatalf("audit = %+v", tx.Records)
	}
	// Applied again (a retried commit, or a report came first): nothing more.
	if err := plan.Apply(tx, teller{}, plan.Plan{Steps: []plan.Step{step}}); err != nil || len(tx.Records) != 1 {
		t.Fatalf("applied again: %v, audit %+v", err, tx.Records)
	}
}

// A stage request moves only from the state it is in, and only as
// record.StageMoves allows: a report on a request that moved meanwhile,
// or a move the lifecycle has no arrow for (a staged run failed, a
// cancelled one started), is refused and writes nothing, on the store and
// in memory alike.
func TestStageRequestsMoveOnlyAsTheLifecycleAllows(t *testing.T) {
	for name, update := range stores(t) {
		t.Run(name, func(t *testing.T) {
			req := record.StageRequest{Repo: repo, PR: 1, RunID: 9, State: record.StageRequested, OriginRef: record.OriginRef{CommentID: 88}}
			if err := update(func(tx record.Tx) error { return tx.AddStageRequest(&req) }); err != nil {
				t.Fatal(err)
			}
			move := func(from, to record.StageState) error {
				return update(func(tx record.Tx) error {
					r, err := tx.StageRequestByComment(repo, 88)
					if err != nil {
						return err
					}
					r.State = to
					return tx.MoveStageRequest(r, from)
				})
			}
			for _, tc := range []struct {
				from, to record.StageState
				ok       bool
			}{
				{record.StageStarted, record.StageStaged, false},     // it is requested, not started
				{record.StageRequested, record.StageUnstaged, false}, // no such arrow
				{record.StageRequested, record.StageStarted, true},
				{record.StageStarted, record.StageStaged, true},
				{record.StageStaged, record.StageFailed, false},
				{record.StageStaged, record.StageUnstaged, true},
				{record.StageUnstaged, record.StageStaged, false}, // a state it never leaves
			} {
				err := move(tc.from, tc.to)
				if tc.ok != (err == nil) || (err != nil && !errors.Is(err, record.ErrStageMoved)) {
					t.Fatalf("%s -> %s: err %v, want ok %v", tc.from, tc.to, err, tc.ok)
				}
			}
			if err := update(func(tx record.Tx) error {
				r, err := tx.StageRequestByComment(repo, 88)
				if err == nil && r.State != record.StageUnstaged {
					return fmt.Errorf("stored state %s, want unstaged", r.State)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A stage request is found by its origin, kind and id: a click's request
// and a comment's with the same number are two requests, on the store
// and in memory alike.
func TestStageRequestsKeyedByOrigin(t *testing.T) {
	for name, update := range stores(t) {
		t.Run(name, func(t *testing.T) {
			byComment := record.StageRequest{Repo: repo, PR: 1, RunID: 9, State: record.StageRequested}
			byComment.SetOrigin(record.Origin{Kind: record.OriginComment, ID: 555})
			byClick := record.StageRequest{Repo: repo, PR: 1, RunID: 10, State: record.StageRequested}
			byClick.SetOrigin(record.Origin{Kind: record.OriginSlack, ID: 555})
			if err := update(func(tx record.Tx) error {
				if err := tx.AddStageRequest(&byComment); err != nil {
					return err
				}
				return tx.AddStageRequest(&byClick)
			}); err != nil {
				t.Fatal(err)
			}
			if err := update(func(tx record.Tx) error {
				c, err := tx.StageRequestByComment(repo, 555)
				if err != nil || c == nil || c.RunID != 9 {
					return fmt.Errorf("the comment's request: %+v, %v", c, err)
				}
				k, err := tx.StageRequestByOrigin(repo, record.Origin{Kind: record.OriginSlack, ID: 555})
				if err != nil || k == nil || k.RunID != 10 {
					return fmt.Errorf("the click's request: %+v, %v", k, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
