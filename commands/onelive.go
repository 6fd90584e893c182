package commands

import (
	"fmt"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// oneLive holds one live sequence per PR and kind where a command begins
// one, whatever its handler remembered: an accepted result whose plan
// begins a sequence (a plan.PutSequence read at version 0) on a PR where
// one of that kind lives, and does not itself move that one (a put read at
// its version), comes to what the kind declares (seq.Kind.OnStart): Refuse,
// a rejection that says which sequence waits and how to stop it; Replace,
// the live one ended as "replaced" before the new one begins. Never a plan
// that fails its own guard again and again (a dead letter): a sequence
// begun meanwhile makes the plan stale, and it is decided again from here.
func oneLive(env Env, in Invocation, spec *Spec, res Result) Result {
	if res.Outcome != Accepted || env.State == nil {
		return res
	}
	for _, begin := range puts(res.Plan, true) {
		kind := begin.Seq.Kind
		cur, err := env.State.Sequence(in.Repo, in.PR, kind)
		if err != nil {
			return Result{Err: fmt.Errorf("reading %s#%d's %s sequence: %w", in.Repo, in.PR, kind, err)}
		}
		if cur == nil || cur.Done || movesIt(res.Plan, cur) {
			continue
		}
		k, _ := env.Commands.kind(kind)
		if k.OnStart == seq.Replace {
			res.Plan = replacing(res.Plan, cur, in)
			continue
		}
		return refusedForLive(in, spec, k, cur)
	}
	return res
}

// puts are the plan's sequence writes (nested plans included): with
// begins, only those that begin one (read at version 0).
func puts(p plan.Plan, begins bool) []plan.PutSequence {
	var out []plan.PutSequence
	for _, s := range p.Steps {
		switch x := s.(type) {
		case plan.Plan:
			out = append(out, puts(x, begins)...)
		case plan.PutSequence:
			if !begins || x.Read == 0 {
				out = append(out, x)
			}
		}
	}
	return out
}

// movesIt says the plan writes the live sequence cur itself (ends it, or
// moves it on): its kind handles the live one.
func movesIt(p plan.Plan, cur *record.Sequence) bool {
	for _, s := range puts(p, false) {
		if s.Seq.Kind == cur.Kind && s.Read == cur.Version && s.Read != 0 {
			return true
		}
	}
	return false
}

// replacing is p with the live sequence cur ended first, as "replaced",
// its status comment saying so; the plan's guard that no sequence of the
// kind lives is the guard that cur is still at its version.
func replacing(p plan.Plan, cur *record.Sequence, in Invocation) plan.Plan {
	ended := *cur
	ended.Done, ended.Step = true, "replaced"
	end := plan.PutSequence{Seq: ended, Read: cur.Version}
	if cur.Notice != 0 {
		end.Edit = &plan.Edit{Repo: cur.Repo, PR: cur.PR, Installation: in.Installation, Kind: string(notices.KindReply),
			Body: fmt.Sprintf("⏭️ replaced by a newer one, asked by %s.", mdtext.Mention(in.Actor.Login))}
	}
	var require []plan.Fact
	for _, f := range p.Require {
		if at, ok := f.(plan.SequenceAt); ok && at.Kind == cur.Kind && at.Version == 0 {
			at.Version = cur.Version
			f = at
		}
		require = append(require, f)
	}
	return plan.Plan{Require: require, Steps: append([]plan.Step{end}, p.Steps...)}
}

// refusedForLive is the answer to a command that would begin a second
// live sequence of kind k on the PR: which one waits, since when, and how
// it stops.
func refusedForLive(in Invocation, spec *Spec, k seq.Kind, cur *record.Sequence) Result {
	name := cur.Kind
	if spec != nil && len(spec.Verbs) > 0 {
		name = Code(spec.Verbs[0].Word)
	}
	by := ""
	if cur.ActorLogin != "" {
		by = "asked by " + mdtext.Mention(cur.ActorLogin) + ", "
	}
	stop := "it ends by itself"
	if !cur.Deadline.IsZero() {
		stop += " by " + cur.Deadline.UTC().Format("2006-01-02 15:04 UTC")
	}
	if k.Stop != "" {
		stop = Code(k.Stop) + " stops it"
	}
	return Result{Outcome: Rejected, Reason: fmt.Sprintf("a %s sequence of this PR waits (step %s)", cur.Kind, cur.Step),
		Reply: fmt.Sprintf("%s this PR has a %s under way already (%sat step %s): one at a time; %s.", mdtext.Mention(in.Actor.Login),
			name, by, Code(cur.Step), stop)}
}

// kind is a kind of sequence the modules step, by name.
func (r *Registry) kind(name string) (seq.Kind, bool) {
	if r == nil {
		return seq.Kind{Name: name}, false
	}
	k, ok := r.kinds[name]
	if !ok {
		k.Name = name
	}
	return k, ok
}
