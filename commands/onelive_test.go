package commands

import (
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// seqReader is a state with one PR's sequences, by kind.
type seqReader struct {
	record.Reader
	seqs map[string]*record.Sequence
}

func (r seqReader) Sequence(_ string, _ int, kind string) (*record.Sequence, error) {
	return r.seqs[kind], nil
}

// One live sequence per PR and kind: a plan that begins one where one
// lives is refused (Refuse, the default) or ends the live one first
// (Replace); one that moves the live one itself, or begins where only a
// done one is, goes as it is.
func TestOneLiveSequencePerPRAndKind(t *testing.T) {
	live := &record.Sequence{Kind: "k", Repo: "o/r", PR: 3, Version: 4, Step: "waiting", ActorLogin: "alice", Notice: 9}
	begin := func() Result {
		return Result{Outcome: Accepted, Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: "o/r", PR: 3, Kind: "k"}},
			Steps: []plan.Step{plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: record.Sequence{Kind: "k", Repo: "o/r", PR: 3, Step: "new"}}}}}}}
	}
	in := Invocation{Repo: "o/r", PR: 3}
	in.Actor.Login = "bob"
	spec := &Spec{Verbs: []Verb{{Word: "/k-it"}}}
	env := func(onStart seq.Conflict, cur *record.Sequence) Env {
		return Env{State: seqReader{seqs: map[string]*record.Sequence{"k": cur}},
			Commands: &Registry{kinds: map[string]seq.Kind{"k": {Name: "k", OnStart: onStart, Stop: "/k-it cancel"}}}}
	}
	res := oneLive(env(seq.Refuse, live), in, spec, begin())
	if res.Outcome != Rejected || !strings.Contains(res.Reply, "@bob this PR has a `/k-it` under way already (asked by @alice, at step `waiting`): "+
		"one at a time; `/k-it cancel` stops it.") {
		t.Fatalf("a second begin, refused: %+v", res)
	}
	res = oneLive(env(seq.Replace, live), in, spec, begin())
	if res.Outcome != Accepted || len(res.Plan.Steps) != 2 {
		t.Fatalf("a second begin, replacing: %+v", res)
	}
	end, ok := res.Plan.Steps[0].(plan.PutSequence)
	if !ok || !end.Seq.Done || end.Seq.Step != "replaced" || end.Read != 4 || end.Edit == nil ||
		res.Plan.Require[0].(plan.SequenceAt).Version != 4 {
		t.Fatalf("the replacing plan: %+v", res.Plan)
	}
	moving := begin()
	moving.Plan.Steps = append([]plan.Step{plan.PutSequence{Seq: record.Sequence{Kind: "k", Done: true}, Read: 4}}, moving.Plan.Steps...)
	if res := oneLive(env(seq.Refuse, live), in, spec, moving); res.Outcome != Accepted || len(res.Plan.Steps) != 2 {
		t.Fatalf("a plan that ends the live one itself: %+v", res)
	}
	done := *live
	done.Done = true
	if res := oneLive(env(seq.Refuse, &done), in, spec, begin()); res.Outcome != Accepted {
		t.Fatalf("a begin where only a done one is: %+v", res)
	}
}
