package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

// Spec is one command: how it is typed, who may run it, what /opsbot help
// says of it, and the handler that runs it. Each command is a package of
// its own under commands/ that returns its Spec; the server's wiring
// registers them in order (NewRegistry), the order /opsbot help lists them.
type Spec struct {
	// Name is the canonical name, as audited and as `opsbot parse` prints it.
	Name string
	// Verbs are the ways to type it; the first is its own name.
	Verbs []Verb
	// Access is who may run it on a repository (config's min_role and
	// allow lists for it).
	Access func(rc *config.Repo) config.Access
	// LastWins runs only the last well-formed line of the command in a
	// comment; the earlier ones are audited ignored.
	LastWins bool
	// Group, when set, makes LastWins hold across the commands of the
	// group: of their lines in a comment, only the last well-formed one
	// runs (commands that each grant the PR's one pin).
	Group string
	// AnswersEdits makes the command's rule one an editor must pass to be
	// told that commands added by editing a comment are not run.
	AnswersEdits bool
	// Help is what /opsbot help says of it on a repository.
	Help func(rc *config.Repo) Help
	// Handler runs it.
	Handler Handler
	// Buttons are the buttons opsbot offers for it (check runs, Slack).
	Buttons []Button
}

// Verb is one way to type a command.
type Verb struct {
	// Word is the first word as typed, with its slash, in lower case.
	Word string
	// Usage is the usage text a line with bad arguments gets.
	Usage string
	// Args reads the arguments (split on spaces and tabs) into c; a reason
	// makes the line a usage error.
	Args func(c *Command, args []string, opt Options) (reason string)
	// UsageNote follows the usage text in the reply to a bad line (say,
	// what a run argument may be).
	UsageNote string
}

// Help is what /opsbot help says of a command.
type Help struct {
	Rows     []HelpRow // lines of the command table
	About    string    // paragraphs after the table, Markdown
	Settings []string  // bullets of the repository's settings
}

// HelpRow is one line of the /opsbot help table.
type HelpRow struct {
	Command string // as typed, Markdown
	What    string
	Who     string // who may run it (Who)
}

// Handler runs a command. Prepare does the reads (GitHub, the run, opsbot's
// state through env.State) outside the transaction, once, and returns what
// the line comes to with its plan: data the dispatcher applies in the
// delivery's transaction (plan.Apply), checking the facts the plan was
// made on, as often as the commit is tried.
type Handler interface {
	Prepare(ctx context.Context, env Env, in Invocation, line Line) Result
}

// TakeBacker is a handler whose effects the edit or the deletion of their
// origin takes back (a pin, a stage request not yet dispatched).
type TakeBacker interface {
	// TakeBack does the reads it needs (the actor's role, what ch's
	// comment started) and returns the plan that takes it back, or an
	// empty plan.
	// An error (a read that failed) retries the delivery.
	TakeBack(ctx context.Context, env Env, ch Change) (plan.Plan, error)
}

// Registry is the set of commands opsbot runs, in order.
type Registry struct {
	specs   []*Spec
	byName  map[string]*Spec
	verbs   map[string]registered
	longest int
	// kinds are the kinds of sequence the modules step, by name.
	kinds map[string]seq.Kind
}

type registered struct {
	spec *Spec
	verb *Verb
}

// maxVerb bounds a verb's length: a line's first word is looked up without
// allocating.
const maxVerb = 32

// NewRegistry registers specs in order. Names and verbs must be unique, and
// every spec complete.
func NewRegistry(specs ...Spec) (*Registry, error) {
	r := &Registry{byName: map[string]*Spec{}, verbs: map[string]registered{}}
	for i := range specs {
		s := &specs[i]
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("commands: spec %d has no name", i)
		case r.byName[s.Name] != nil:
			return nil, fmt.Errorf("commands: %s is registered twice", s.Name)
		case len(s.Verbs) == 0, s.Access == nil, s.Help == nil, s.Handler == nil:
			return nil, fmt.Errorf("commands: %s needs verbs, an access rule, help and a handler", s.Name)
		}
		if err := r.checkButtons(s); err != nil {
			return nil, err
		}
		r.specs = append(r.specs, s)
		r.byName[s.Name] = s
		for j := range s.Verbs {
			v := &s.Verbs[j]
			if !strings.HasPrefix(v.Word, "/") || v.Word != strings.ToLower(v.Word) || len(v.Word) > maxVerb ||
				strings.ContainsAny(v.Word, " \t") || v.Args == nil {
				return nil, fmt.Errorf("commands: %s: verb %q must be one lower-case word after a slash, at most %d bytes, with an argument reader", s.Name, v.Word, maxVerb)
			}
			if _, dup := r.verbs[v.Word]; dup {
				return nil, fmt.Errorf("commands: verb %s is registered twice", v.Word)
			}
			r.verbs[v.Word] = registered{spec: s, verb: v}
			r.longest = max(r.longest, len(v.Word))
		}
	}
	// A click runs a registered command (a run named or none), or it would
	// be refused as one opsbot no longer has.
	for _, s := range r.specs {
		for _, b := range s.Buttons {
			for _, run := range []int64{0, 1} {
				if name := b.Command(run).Name; r.byName[name] == nil {
					return nil, fmt.Errorf("commands: %s: button %s runs %q, which is no registered command", s.Name, b.ID, name)
				}
			}
		}
	}
	return r, nil
}

// maxCheckActions is how many buttons GitHub shows on a check run.
const maxCheckActions = 3

// checkButtons holds s's buttons to what a click can name: an identifier
// unique across every command, not the gate's own Sweep anyway, and within
// GitHub's lengths (a cut identifier would name no button); a command to
// run; somewhere to be offered; and, with the buttons registered before,
// at most three on a check run (GitHub shows no more).
func (r *Registry) checkButtons(s *Spec) error {
	var held []string // the check-run buttons registered, "Label (command)"
	for _, p := range append(slices.Clone(r.specs), s) {
		for _, b := range p.Buttons {
			if b.Label != "" && !b.Own {
				held = append(held, fmt.Sprintf("%q (%s)", b.Label, p.Name))
			}
		}
	}
	for i, b := range s.Buttons {
		switch {
		case b.ID == "", utf8.RuneCountInString(b.ID) > 20,
			strings.IndexFunc(b.ID, func(c rune) bool { return unicode.IsSpace(c) || !unicode.IsPrint(c) }) >= 0:
			return fmt.Errorf("commands: %s: button %d's identifier %q must be one word of 1 to 20 characters", s.Name, i, b.ID)
		case b.ID == notices.ActionSweep:
			return fmt.Errorf("commands: %s: button identifier %q is the gate's Sweep anyway", s.Name, b.ID)
		case utf8.RuneCountInString(b.Label) > 20, utf8.RuneCountInString(b.Description) > 40:
			return fmt.Errorf("commands: %s: button %s's label (20 characters at most) or description (40) is too long for a check run", s.Name, b.ID)
		case b.Label != "" && b.Description == "":
			return fmt.Errorf("commands: %s: button %s has a label and no description: GitHub refuses a check run action without one", s.Name, b.ID)
		case b.Command == nil:
			return fmt.Errorf("commands: %s: button %s runs no command", s.Name, b.ID)
		case b.Label == "" && b.Slack == nil:
			return fmt.Errorf("commands: %s: button %s is offered nowhere (neither a label for check runs nor Slack words)", s.Name, b.ID)
		case b.Own && b.Slack == nil:
			return fmt.Errorf("commands: %s: button %s is its command's own: it is offered in that command's Slack messages, "+
				"so it needs Slack words (a label too puts it on the command's own check run)", s.Name, b.ID)
		}
		for j, c := range s.Buttons[:i] {
			if c.ID == b.ID {
				return fmt.Errorf("commands: %s: buttons %d and %d share the identifier %q", s.Name, j, i, b.ID)
			}
		}
		if _, _, dup := r.Button(b.ID); dup {
			return fmt.Errorf("commands: %s: button identifier %q is another command's", s.Name, b.ID)
		}
	}
	if len(held) > maxCheckActions {
		return fmt.Errorf("commands: %s: the commands offer %d buttons on a check run, and GitHub shows %d at most: %s; give one no Label "+
			"(a Slack button only) or leave it out", s.Name, len(held), maxCheckActions, strings.Join(held, ", "))
	}
	return nil
}

// MustRegistry is NewRegistry for a set known to be well formed.
func MustRegistry(specs ...Spec) *Registry {
	r, err := NewRegistry(specs...)
	if err != nil {
		panic(err)
	}
	return r
}

// Specs are the registered commands in order.
func (r *Registry) Specs() []*Spec { return r.specs }

// Spec is the command named name.
func (r *Registry) Spec(name string) (*Spec, bool) {
	s, ok := r.byName[name]
	return s, ok
}

// lookup finds the verb a line's first word names, in any case.
func (r *Registry) lookup(word string) (registered, bool) {
	if len(word) > r.longest {
		return registered{}, false
	}
	var buf [maxVerb]byte
	b := buf[:len(word)]
	for i := 0; i < len(word); i++ {
		c := word[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	v, ok := r.verbs[string(b)]
	return v, ok
}

// group is the LastWins group of the command named name: its Group, else
// its name.
func (r *Registry) group(name string) string {
	if s, ok := r.byName[name]; ok && s.Group != "" {
		return s.Group
	}
	return name
}
