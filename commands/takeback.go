package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// LiveSequence is the PR's sequence of kind while it lives (nil: none, or
// done).
func LiveSequence(st interface {
	Sequence(repo string, pr int, kind string) (*record.Sequence, error)
}, repo string, pr int, kind string) (*record.Sequence, error) {
	if st == nil {
		return nil, fmt.Errorf("reading the %s sequence of %s#%d: no state reader", kind, repo, pr)
	}
	s, err := st.Sequence(repo, pr, kind)
	if err != nil {
		return nil, fmt.Errorf("reading the %s sequence of %s#%d: %w", kind, repo, pr, err)
	}
	if s == nil || s.Done {
		return nil, nil
	}
	return s, nil
}

// TakenBack is a change of a comment (deleted, or its command edited away)
// as it concerns the live sequence of a kind the comment started: what the
// kind's TakeBack reads before it decides how the sequence ends.
type TakenBack[D any] struct {
	Cur  *record.Sequence
	Data D
	// Did is what the change did ("deleted the comment", "edited away the
	// command", recovery's finding noted); Who is who did it, as the status
	// comment says it ("someone" for a change recovery found).
	Did, Who string
	// Guard is the sequence still at the version read.
	Guard plan.Fact
}

// TakeBackOf reads what ch does to the live sequence of kind on its PR:
// nil when there is none, another origin started it, or the command it
// ran (line, of its data) is still in the comment as written.
func TakeBackOf[D any](env Env, ch Change, kind string, line func(D) string) (*TakenBack[D], error) {
	if env.State == nil {
		return nil, errors.New("commands: no state reader to take a sequence back")
	}
	cur, err := LiveSequence(env.State, ch.Repo, ch.PR, kind)
	if err != nil || cur == nil || !cur.Origin().Same(ch.Origin) {
		return nil, err
	}
	data, err := seq.DataOf[D](cur)
	if err != nil {
		return nil, err
	}
	if !ch.Deleted && HasLine(ch.Commands, line(data)) {
		return nil, nil // the command is still there, as written
	}
	t := &TakenBack[D]{Cur: cur, Data: data, Did: "deleted the comment", Who: mdtext.Mention(ch.Actor.Login),
		Guard: plan.SequenceAt{Repo: ch.Repo, PR: ch.PR, Kind: kind, Version: cur.Version}}
	if !ch.Deleted {
		t.Did = "edited away the command"
	}
	if ch.Recovered {
		t.Did, t.Who = "(found by recovery: a lost webhook) "+t.Did, "someone"
	}
	return t, nil
}

// Kept is the plan of a take-back the one who changed the comment may not
// make (the comment's author may, and so may the command's role): the
// change audited as kept (what the comment did: "started @x's merge"; what
// taking it back is: "stopping it"; what stays: "it goes on"), and noted on
// the sequence so recovery does not take it back later. ok false: they
// may, and the kind ends the sequence. A role that could not be read is an
// error: the delivery is tried again.
func (t *TakenBack[D]) Kept(ctx context.Context, env Env, ch Change, what, undo, stays string, rec record.AuditRecord) (p plan.Plan, ok bool, err error) {
	v := env.MayTakeBack(ctx, ch, ch.Spec)
	if v.Allowed {
		return plan.Plan{}, false, nil
	}
	if v.CheckFailed {
		return plan.Plan{}, false, fmt.Errorf("checking the role of @%s, who %s that %s: %s", ch.Actor.Login, t.Did, what, v.Reason)
	}
	rec.Outcome = "kept"
	rec.Reason = fmt.Sprintf("@%s %s that %s, but %s needs %s: %s", ch.Actor.Login, t.Did, what, undo, env.Policy(ch.Spec).Describe(), stays)
	return plan.Plan{Require: []plan.Fact{t.Guard}, Steps: []plan.Step{plan.Audit{Record: AuditOf(ch.Invocation, rec)}, OriginSeen(t.Cur, ch.Deleted)}}, true, nil
}
