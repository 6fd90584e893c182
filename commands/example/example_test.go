// Package example_test is a whole command written as the next engineer
// would write one, kept beside opsbot's own as its test (docs/architecture.md,
// "Adding a command"): /echo-later <word> has a configuration section of its
// own (repos[].echo_later, with its own role), a sequence that waits for an
// event route (a check suite completing on the PR's head) or its deadline,
// and a button on a finished sweep's check run. Everything it is lives in
// this package: the server takes it as one more module, and its end-to-end
// tests run here, on the same world as opsbot's own (internal/e2e). A real
// command adds one line to commands/all, its keys to opsbot.example.yaml
// and docs/configuration.md, and its row to the README: four files outside
// its package.
package example_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/all"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Name is the command's canonical name; SeqKind its sequence's.
const (
	Name    = "echo-later"
	SeqKind = "echo_later"
)

// Settings is repos[].echo_later: who may run it, and how long it waits.
type Settings struct {
	config.Access `yaml:",inline"`
	Wait          time.Duration `yaml:"wait"`
}

// Section is the command's own section: its type, defaults and checks.
var Section = config.Typed[Settings]{
	Key: "echo_later",
	Defaults: func(s *Settings) {
		if s.MinRole == "" {
			s.MinRole = "write"
		}
		if s.Wait == 0 {
			s.Wait = time.Hour
		}
	},
	Check: func(_ *config.Repo, s *Settings) []config.SectionProblem {
		if s.Wait < time.Minute || s.Wait > 24*time.Hour {
			return []config.SectionProblem{{Key: "wait", Message: fmt.Sprintf("%v is out of range: from 1m to 24h (for example 1h)", s.Wait)}}
		}
		return nil
	},
}

// Handler runs /echo-later and steps its sequences.
type Handler struct {
	Notices *notices.Notifier
	Now     func() time.Time
}

// Module is the command, from what every command shares.
func Module(d commands.Deps) commands.Module {
	h := &Handler{Notices: d.Notices, Now: d.Now}
	sec := Section.Section()
	return commands.Module{
		Spec: commands.Spec{
			Name:   Name,
			Verbs:  []commands.Verb{{Word: "/echo-later", Usage: "usage: /echo-later <word>", Args: oneWord}},
			Access: func(rc *config.Repo) config.Access { return Section.Of(rc).Access },
			Help: func(rc *config.Repo) commands.Help {
				return commands.Help{Rows: []commands.HelpRow{{Command: "`/echo-later <word>`",
					What: "say the word when the head's checks complete", Who: commands.Who(Section.Of(rc).Access)}}}
			},
			Handler: h,
			Buttons: []commands.Button{{ID: "echo", Label: "Echo the run", Description: "Echo this run once the checks end",
				Command: func(run int64) commands.Command {
					return commands.Command{Name: Name, Verb: "/echo-later", Args: []string{fmt.Sprint(run)}, Text: fmt.Sprintf("/echo-later %d", run)}
				}}},
		},
		// Its event routes (a pull_request event wakes every kind): a check
		// suite's completion on the PR's head, whose PR opsbot finds itself;
		// and a review that approves the PR, an event no other command
		// uses, so its route says how its PR is found and what it records.
		// The engine decodes its data, guards its plans by the version
		// that was due and applies them (seq.Typed): its states only decide.
		Kinds: []seq.Kind{seq.Typed[data]{Name: SeqKind, Step: h.wake, Expire: h.expire, Teller: func() plan.Teller { return h.Notices.Teller() }, Routes: []seq.Route{
			seq.On("check_suite"),
			{Event: "pull_request_review", Label: "Pull request reviews", Why: "/echo-later says its word when a review approves the PR",
				Find: approvals, Record: noteApproval},
		}}.Kind()},
		Section: &sec,
	}
}

func oneWord(c *commands.Command, args []string, _ commands.Options) string {
	if len(args) != 1 {
		return "/echo-later takes one word"
	}
	c.Args = args
	return ""
}

type data struct {
	Word         string `json:"word"`
	Installation int64  `json:"installation"`
	Line         string `json:"line"`
	// ApprovedBy is who approved the PR while it waited (noteApproval).
	ApprovedBy string `json:"approved_by,omitempty"`
}

// review is the part of a pull_request_review event the command reads.
type review struct {
	Action string `json:"action"`
	Review struct {
		State string `json:"state"`
		// AuthorAssociation is the reviewer's standing in the repository,
		// as GitHub says it.
		AuthorAssociation string `json:"author_association"`
		User              struct {
			Login string `json:"login"`
		} `json:"user"`
	} `json:"review"`
}

func reviewOf(body []byte) (review, error) {
	var r review
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("reading a pull_request_review delivery: %w", err)
	}
	return r, nil
}

// approvals finds the PR of a review that approves it, by someone of the
// repository (its owner, a member of its organization, a collaborator):
// anyone may review a public repository's PR. Any other review (a comment,
// changes asked, a dismissal, an outsider's) is not stored.
func approvals(action string, body []byte) (seq.Found, error) {
	r, err := reviewOf(body)
	if err != nil {
		return seq.Found{}, err
	}
	if action != "submitted" || !strings.EqualFold(r.Review.State, "approved") {
		return seq.Found{Ignored: "not a review that approves"}, nil
	}
	switch r.Review.AuthorAssociation {
	case "OWNER", "MEMBER", "COLLABORATOR":
	default:
		return seq.Found{Ignored: "an approval by someone outside the repository"}, nil
	}
	return seq.PRNumber(action, body)
}

// noteApproval records who approved the PR on its waiting echo, which the
// wake-up the delivery makes then says.
func noteApproval(_ context.Context, _ *config.Repo, d seq.Delivered) (string, seq.Write, error) {
	r, err := reviewOf(d.Body)
	if err != nil {
		return "", nil, err
	}
	return "echo-approval-noted", func(tx record.Tx) error {
		cur, err := tx.Sequence(d.Repo, d.PR, SeqKind)
		if err != nil || cur == nil || cur.Done {
			return err // no echo waits: nothing to note
		}
		dt, err := seq.DataOf[data](cur)
		if err != nil {
			return err
		}
		dt.ApprovedBy = r.Review.User.Login
		next := *cur
		if next.Data, err = json.Marshal(dt); err != nil {
			return err
		}
		return tx.PutSequence(&next, cur.Version)
	}, nil
}

// Prepare starts the PR's echo: a status comment, and a sequence that
// waits for an event until its deadline.
func (h *Handler) Prepare(_ context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	word := line.Args[0]
	raw, err := json.Marshal(data{Word: word, Installation: in.Installation, Line: line.Text})
	if err != nil {
		return commands.Result{Err: err}
	}
	wait := Section.Of(env.Repo).Wait
	s := record.Sequence{Kind: SeqKind, Repo: in.Repo, PR: in.PR, Step: "waiting", Data: raw, ActorID: in.Actor.ID, ActorLogin: in.Actor.Login,
		Deadline: h.Now().Add(wait)}
	s.SetOrigin(in.Origin)
	status := plan.Comment{Repo: in.Repo, PR: in.PR, Installation: in.Installation, Kind: string(notices.KindReply),
		Body: fmt.Sprintf("⏳ %s: I will say %s when the head's checks complete (or give up in %s).", mdtext.Mention(in.Actor.Login),
			mdtext.Code(word), commands.Span(wait))}
	return commands.Result{Outcome: commands.Accepted, Acknowledges: true,
		Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind}},
			Steps: []plan.Step{plan.PutSequence{Seq: s, Status: &status}}}}
}

// wake says the word: an event woke the sequence.
func (h *Handler) wake(_ context.Context, _ *config.Repo, s seq.Step[data]) (string, plan.Plan, error) {
	if s.Data.ApprovedBy != "" {
		return h.end(s, "done", "✅ %s: %s ("+strings.ReplaceAll(mdtext.Mention(s.Data.ApprovedBy), "%", "%%")+" approved the PR).")
	}
	return h.end(s, "done", "✅ %s: %s (a check suite of the head completed).")
}

// expire gives up at the deadline.
func (h *Handler) expire(_ context.Context, _ *config.Repo, s seq.Step[data]) (string, plan.Plan, error) {
	return h.end(s, "expired", "⌛ %s: no check suite of the head completed in time; %s stays unsaid.")
}

func (h *Handler) end(s seq.Step[data], step, words string) (string, plan.Plan, error) {
	next := *s.Seq
	next.Step, next.Done = step, true
	edit := plan.Edit{Repo: next.Repo, PR: next.PR, Installation: s.Data.Installation, Kind: string(notices.KindReply),
		Body: fmt.Sprintf(words, mdtext.Mention(next.ActorLogin), mdtext.Code(s.Data.Word))}
	return "echo-" + step, plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: next, Read: s.Seq.Version, Edit: &edit}}}, nil
}

// The command fits beside opsbot's own (what the server's start would
// refuse fails here first): its verb and button are its own, and its
// labelled button is one of the three a check run holds. A fourth
// labelled button is refused, naming the limit and the buttons that hold
// the places.
func TestModuleFitsBesideOpsbots(t *testing.T) {
	if err := all.Check(Module); err != nil {
		t.Fatal(err)
	}
	fourth := func(d commands.Deps) commands.Module {
		m := Module(d)
		b := m.Spec.Buttons[0]
		b.ID, b.Label = "echo-twice", "Echo it twice"
		m.Spec.Buttons = append(m.Spec.Buttons, b)
		return m
	}
	err := all.Check(fourth)
	if err == nil || !strings.Contains(err.Error(), "the commands offer 4 buttons on a check run, and GitHub shows 3 at most: "+
		`"Reuse for next push" (reuse-sweep-run), "Merge with reuse" (merge-with-reuse), "Echo the run" (echo-later), "Echo it twice" (echo-later)`) {
		t.Fatalf("a fourth check-run button: %v", err)
	}
}
