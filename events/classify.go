package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// Schema classifies verified webhook deliveries: which ones opsbot uses,
// the PR that orders each, and for a comment what the worker needs of it
// but its commands (the worker reads those).
type Schema struct {
	// Repo gives a served repository's configured name; ok false: not served.
	Repo func(fullName string) (name string, ok bool)
	// WebHost is the host of run URLs in commands (default github.com).
	WebHost string
	// Commands read a comment's command lines.
	Commands *commands.Registry
	Now      func() time.Time
	// Heads lists the PRs of a repository whose recorded head is a commit,
	// or else whose live sequence watches it (state.Store.PRsOfCommit: a
	// merge commit whose run a watch follows): how an event that names
	// only a commit finds the PR that orders it (classifyByHead). Nil: such
	// events name no PR.
	Heads func(repo, sha string) ([]int, error)
	// Approvals finds the PR of the approval a workflow run was dispatched
	// for: bound to it (run), or naming its id (title, the run's
	// display_title); 0 for none. A dispatched run's head is the default
	// branch's, so no head finds its PR. Nil: no run is an approval's.
	Approvals func(repo string, run int64, title string) (int, error)
	// Routes are the kinds' event routes (NewRoutes): an event of a row
	// of opsbot's own that only a kind uses is ignored unless one routes it
	// (or a button needs it), and an event no row has is stored only when
	// a kind routes it, ordered by its route's Find.
	Routes *Routes
}

// NewSchema is the schema of the repositories the configuration in use
// serves (a reload that adds one is seen at once).
func NewSchema(cfg *config.Live, reg *commands.Registry, now func() time.Time) *Schema {
	return &Schema{WebHost: cfg.Get().WebHost(), Commands: reg, Now: now, Repo: func(name string) (string, bool) {
		r, ok := cfg.Get().Repo(name)
		if !ok {
			return "", false
		}
		return r.Name, true
	}}
}

// Ignored reasons: why Classify did not keep a delivery.
const (
	IgnoredEvent    = "event not used"
	IgnoredRepo     = "repository not served"
	IgnoredIssue    = "comment on an issue, not a pull request"
	IgnoredNoPR     = "names no pull request"
	IgnoredDispatch = "repository dispatch that is not a stage result"
)

// Classify reads a verified delivery's body once and returns the record to
// store (its Body set to body), or nil and why opsbot ignores it. An error
// means the body is not valid JSON.
func (s *Schema) Classify(event, id string, body []byte) (*state.Delivery, string, error) {
	var env envelope
	if err := decodeBody(body, &env); err != nil {
		return nil, "", fmt.Errorf("events: decoding the %s delivery: %w", event, err)
	}
	k, own := kindOf(event)
	switch {
	case !own && !s.Routes.uses(event):
		return nil, IgnoredEvent, nil
	case own && k.declared && !s.Routes.uses(event):
		return nil, IgnoredUndeclared, nil
	}
	if env.Repository == nil {
		return nil, IgnoredRepo + ": the payload names no repository", nil
	}
	repo, ok := s.Repo(env.Repository.FullName)
	if !ok {
		// A typo in repos[].name looks like a working setup unless the
		// answer says which repository was not served.
		return nil, IgnoredRepo + ": " + clipName(env.Repository.FullName) + " is not one of this opsbot's repos[]", nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	d := &state.Delivery{ID: id, Event: event, Action: env.Action, Repo: repo, ReceivedAt: now(), Body: body}
	classify := (*Schema).routed
	if own && k.classify != nil {
		classify = k.classify
	}
	if why, err := classify(s, &env, id, d); why != "" || err != nil {
		return nil, why, err
	}
	return d, "", nil
}

// IgnoredUnreadable is a delivery whose route could not read which PR it
// is about (a field of another type than GitHub documents).
const IgnoredUnreadable = "the route of the event could not read it"

// routed classifies a delivery of an event a kind's route finds the PR
// of (seq.Route.Find): by its PR, or by the PR its commit heads.
func (s *Schema) routed(env *envelope, _ string, d *state.Delivery) (string, error) {
	find := s.Routes.find(d.Event)
	if find == nil {
		return IgnoredUndeclared, nil
	}
	f, err := find(env.Action, d.Body)
	switch {
	case err != nil:
		// The body is JSON (the envelope read it), of a shape the route does
		// not take: a sending again would be the same body.
		return IgnoredUnreadable + ": " + clipName(err.Error()), nil
	case f.Ignored != "":
		return f.Ignored, nil
	case f.PR > 0:
		d.PR = f.PR
		return "", nil
	case f.Head != "":
		return s.classifyByHeadSHA(f.Head, d)
	}
	return IgnoredNoPR, nil
}

// ingested is what Classify read from a delivery's body, stored with it as
// state.Delivery.Parsed so the worker does not decode the envelope again;
// a comment's commands the worker reads itself (parseCommands), unless a
// parse of the running parser's version is stored already.
type ingested struct {
	Comment *commentRecord `json:"comment,omitempty"`
}

// commentRecord is a comment delivery as the worker uses it.
type commentRecord struct {
	Action       string  `json:"action"`
	PR           int     `json:"pr"`
	PRState      string  `json:"pr_state,omitempty"`
	PRTitle      string  `json:"pr_title,omitempty"`
	PRAuthor     string  `json:"pr_author,omitempty"`
	ID           int64   `json:"id"`
	URL          string  `json:"url,omitempty"`
	Author       Account `json:"author"`
	Sender       Account `json:"sender"`
	Installation int64   `json:"installation,omitempty"`
	// Parser is the version of the command parser (commands.ParserVersion)
	// that read Commands and OldCommands; 0: not read yet (ingest stores
	// the record without them), or read by a build before the parser had
	// versions. Any other version than the running one is read again.
	Parser   int             `json:"parser,omitempty"`
	Commands []storedCommand `json:"commands,omitempty"`
	// OldCommands are, for an edit, the commands of the body before it.
	OldCommands []storedCommand `json:"old_commands,omitempty"`
	// ExpectHead is, for a comment recovery found, the PR's head when the
	// comment was posted (a pin is taken only while it still is).
	ExpectHead string `json:"expect_head,omitempty"`
	// TakenBack is, for a deletion or an edit recovery found, that it takes
	// back what the comment started whoever made it.
	TakenBack bool `json:"taken_back,omitempty"`
}

// storedCommand is commands.Command with every field kept (its own JSON
// form, printed by `opsbot parse`, leaves some out). The two convert.
type storedCommand struct {
	Line    int      `json:"line"`
	Name    string   `json:"name"`
	RunID   int64    `json:"run_id,omitempty"`
	Cancel  bool     `json:"cancel,omitempty"`
	Error   string   `json:"error,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Verb    string   `json:"verb,omitempty"`
	Text    string   `json:"text,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Args    []string `json:"args,omitempty"`
}

func storeCommands(cmds []commands.Command) []storedCommand {
	if len(cmds) == 0 {
		return nil
	}
	out := make([]storedCommand, len(cmds))
	for i, c := range cmds {
		out[i] = storedCommand(c)
	}
	return out
}

func loadCommands(cmds []storedCommand) []commands.Command {
	out := make([]commands.Command, len(cmds))
	for i, c := range cmds {
		out[i] = commands.Command(c)
	}
	return out
}

// comment is the record of a comment delivery as ingest stores it: who,
// where and what, but not its commands. Reading those (goldmark's block
// parse, the one part of ingest whose cost grows with what the comment
// holds) is left out of the webhook request: the worker does it
// (commentOf), after the delivery is stored.
func (s *Schema) comment(env *envelope) *commentRecord {
	c := &commentRecord{Action: env.Action, PR: env.Issue.Number, PRState: env.Issue.State, PRTitle: env.Issue.Title,
		PRAuthor: env.Issue.User.Login, ID: env.Comment.ID, URL: env.Comment.HTMLURL, Author: env.Comment.User,
		Sender: env.Sender, Installation: env.Installation.ID}
	if env.Recovery != nil {
		c.ExpectHead = strings.ToLower(env.Recovery.HeadSHA)
		c.TakenBack = env.Recovery.TakenBack
	}
	return c
}

// parseCommands reads the commands of a comment record from its delivery's
// body (the comment, and for an edit the body before it) with reg, and
// stamps the record with the parser's version.
func parseCommands(c *commentRecord, body []byte, reg *commands.Registry, opt commands.Options) error {
	var env struct {
		Comment *struct {
			Body string `json:"body"`
		} `json:"comment"`
		Changes *BodyChange `json:"changes"`
	}
	if err := decodeBody(body, &env); err != nil {
		return fmt.Errorf("events: decoding the comment to read its commands: %w", err)
	}
	c.Commands, c.OldCommands = nil, nil
	if env.Comment != nil {
		c.Commands = storeCommands(reg.Parse(env.Comment.Body, opt))
	}
	if c.Action == "edited" && env.Changes != nil && env.Changes.Body != nil {
		c.OldCommands = storeCommands(reg.Parse(env.Changes.Body.From, opt))
	}
	c.Parser = commands.ParserVersion
	return nil
}

// decodeBody decodes a delivery's body as ingest does.
func decodeBody(body []byte, v any) error {
	// The JSON v2 decoder makes one pass over the body where encoding/json
	// makes two (validate, then decode): it was a third of the server's CPU
	// under ingest (docs/BENCHMARKS.md). The options keep encoding/json's
	// leniency: duplicate names, invalid UTF-8 in strings and names in any
	// case are accepted as GitHub's payloads always were.
	return jsonv2.Unmarshal(body, v, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true),
		jsonv2.MatchCaseInsensitiveNames(true))
}

func (s *Schema) classifyComment(env *envelope, id string, d *state.Delivery) (string, error) {
	// Comments on issues that are not pull requests carry no commands.
	if env.Issue == nil || !isPR(env.Issue.PullRequest) {
		return IgnoredIssue, nil
	}
	d.PR = env.Issue.Number
	if env.Comment == nil {
		d.Parsed = json.RawMessage("{}") // no comment: the worker finds nothing to do
		return "", nil
	}
	d.CommentID = env.Comment.ID
	if !strings.HasPrefix(strings.ToLower(id), RecoveryIDPrefix) {
		env.Recovery = nil // only recovery's own deliveries say what recovery knew
	}
	c := s.comment(env)
	// A new comment none of whose lines starts with '/' (most comments)
	// holds no command: it is completed at intake. Any other goes to the
	// worker, which reads its commands.
	d.NoCommands = env.Action == "created" && !commands.MayHoldCommand(env.Comment.Body)
	if d.NoCommands {
		return "", nil // the worker completes it from the header alone: nothing more to record
	}
	raw, err := json.Marshal(ingested{Comment: c})
	if err != nil {
		return "", fmt.Errorf("events: recording the parsed comment: %w", err)
	}
	d.Parsed = raw
	return "", nil
}

// IgnoredNoHead is why an event that names only a commit is ignored when
// the commit is no PR's head as opsbot recorded it, and no live sequence
// watches it.
const IgnoredNoHead = "commit is the head of no pull request opsbot knows, nor one a sequence watches"

// classifyByHead orders an event that names only a commit (a status, a
// check suite, a check run: a row of kinds for one uses it as its
// classify) by the PR whose recorded head the commit is, or else whose
// live sequence watches it (Schema.Heads); when a branch
// heads several PRs (into other bases), the lowest-numbered orders it, and
// its route finds the others with the same index. The index knows a head
// once its pull_request delivery was processed: an event about a head
// whose push is still in the inbox finds no PR and is ignored, so a row
// whose event must not be lost (a button) stores it and resolves the PR in
// the worker instead. A failed read of the index is ErrLookup.
func (s *Schema) classifyByHead(env *envelope, d *state.Delivery) (string, error) {
	return s.classifyByHeadSHA(env.commit(), d)
}

func (s *Schema) classifyByHeadSHA(sha string, d *state.Delivery) (string, error) {
	sha = strings.ToLower(sha)
	if sha == "" || s.Heads == nil {
		return IgnoredNoHead, nil
	}
	prs, err := s.Heads(d.Repo, sha)
	if err != nil {
		return "", fmt.Errorf("%w: finding the PR of head %s: %w", ErrLookup, sha, err)
	}
	if len(prs) == 0 {
		return IgnoredNoHead, nil
	}
	d.PR = prs[0]
	return "", nil
}

// workflowRuns classifies a workflow run's request or completion: a run
// dispatched for an approval is ordered by the approval's PR (its request
// too, which binds a run GitHub did not name); another run's completion by
// the PR its head heads.
func workflowRuns(s *Schema, env *envelope, id string, d *state.Delivery) (string, error) {
	if (env.Action == "requested" || env.Action == "completed") && env.WorkflowRun != nil && env.WorkflowRun.Event == "workflow_dispatch" &&
		s.Approvals != nil {
		pr, err := s.Approvals(d.Repo, env.WorkflowRun.ID, env.WorkflowRun.DisplayTitle)
		if err != nil {
			return "", fmt.Errorf("%w: finding the approval of run %d: %w", ErrLookup, env.WorkflowRun.ID, err)
		}
		if pr > 0 {
			d.PR = pr
			return "", nil
		}
	}
	return completions("completed")(s, env, id, d)
}

func classifyPull(env *envelope, d *state.Delivery) string {
	d.PR = env.Number
	if d.PR == 0 && env.PullRequest != nil {
		d.PR = env.PullRequest.Number
	}
	if d.PR == 0 {
		return IgnoredNoPR
	}
	return ""
}

// IgnoredWakeup is a wake-up that opsbot did not make (its id is not
// opsbot's own).
const IgnoredWakeup = "wake-up not made by opsbot"

func classifyWakeup(env *envelope, id string, d *state.Delivery) string {
	if !strings.HasPrefix(id, seq.IDPrefix) || env.Wakeup == nil || env.Wakeup.Kind == "" {
		return IgnoredWakeup
	}
	d.PR = env.Number
	if d.PR < 0 {
		return IgnoredNoPR
	}
	return "" // PR 0: a sequence of the repository's own (a digest), in a lane of its own
}

func classifyDispatch(env *envelope, d *state.Delivery) string {
	if !strings.HasPrefix(env.Action, "stage-results-") {
		return IgnoredDispatch
	}
	// The staging workflow names the PR in its client payload.
	switch n := env.ClientPayload["pr-number"].(type) {
	case float64:
		if n > 0 && n < 1<<31 {
			d.PR = int(n)
		}
	case string:
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			d.PR = v
		}
	}
	return ""
}

// clipName is a repository's name as GitHub sent it, quoted and at most
// 100 bytes, for a reason said back.
func clipName(name string) string {
	if len(name) > 100 {
		name = name[:100] + "…"
	}
	return strconv.Quote(name)
}
