package gate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// ErrBadAsk is an ask that lacks what a decision needs.
var ErrBadAsk = errors.New("gate: bad request")

// ErrBusy is an ask made while the PR's webhooks received before it are
// still being processed (past API.QuietWait): deciding now could overtake a
// queued push, pin or cancel, so nothing is decided and the asker retries.
var ErrBusy = errors.New("gate: the PR's webhooks are still being processed")

// Request is what the workflow asks (POST /api/v1/gate, `opsbot gate`).
type Request struct {
	Repo   string `json:"repo"`
	PR     int    `json:"pr"`
	SHA    string `json:"sha"`
	Event  string `json:"event"`  // pull_request (default), push or merge_group
	Action string `json:"action"` // the pull_request action; default synchronize
	// Ref is a merge_group ask's group branch (its head_ref,
	// gh-readonly-queue/<base>/pr-<N>-<sha>), which names its PR.
	Ref string `json:"ref,omitempty"`
	// Asker names the credential that asks (set by the server, never read
	// from the ask): a miss one asker's ask found is remembered for it alone,
	// so nobody can make the workflow's own ask answer from a miss they
	// planted (a commit asked about before it was pushed).
	Asker string `json:"-"`
}

// Answer is the decision as the workflow reads it.
type Answer struct {
	Repo         string        `json:"repo"`
	PR           int           `json:"pr,omitempty"`
	SHA          string        `json:"sha"`
	Event        string        `json:"event"`
	Decision     state.Verdict `json:"decision,omitempty"` // pull_request only
	SkipPRSweep  bool          `json:"skip_pr_sweep"`
	ReuseEnabled bool          `json:"reuse_enabled"`
	Reason       string        `json:"reason"`
	RunID        int64         `json:"run_id,omitempty"`
	RunAttempt   int           `json:"run_attempt,omitempty"`
	RunURL       string        `json:"run_url,omitempty"`
	RunHeadSHA   string        `json:"run_head_sha,omitempty"`
	SourcePR     int           `json:"source_pr,omitempty"`
	PinID        uint64        `json:"pin_id,omitempty"`
	AuthorizedBy string        `json:"authorized_by,omitempty"`
	DecidedAt    time.Time     `json:"decided_at,omitzero"`
	// NotHead marks an ask for a commit that is not the PR's head: it
	// answers sweep and nothing was decided or used up.
	NotHead bool `json:"not_head,omitempty"`
	// NotGated marks an ask for a push that the repository's workflow does
	// not gate (a draft, the PR's labels): it answers sweep, and nothing was
	// decided or used up.
	NotGated bool `json:"not_gated,omitempty"`
	// UnknownPR marks an ask for a PR opsbot has no record of (no webhook
	// of it came): it answers sweep, read nothing from GitHub and decided
	// nothing (a PR opsbot never heard of has no pin).
	UnknownPR bool `json:"unknown_pr,omitempty"`
}

// PRFinder reads PRs: the PRs of a commit (for a push to the default
// branch), and one PR (its head, when opsbot has not seen it); and a
// commit (a merge group's tree).
type PRFinder interface {
	PullRequestsForCommit(ctx context.Context, repo, sha string) ([]*github.PullRequest, error)
	GroupReader
}

// API answers the workflow's asks.
type API struct {
	Gate *Gate
	// Quiet waits (bounded) until the PR's deliveries received so far are
	// processed, so an ask does not overtake a push or a comment already in
	// the inbox.
	Quiet func(ctx context.Context, repo string, pr int) error
	// QuietWait bounds Quiet; 0 is 10 s.
	QuietWait time.Duration
	// Finder gives a PR finder for a repository (its installation's client).
	Finder func(repo string) (PRFinder, error)
	// Now is the clock of the answers remembered (default time.Now).
	Now func() time.Time

	misses missCache // answers that read GitHub and found nothing to use
}

// CanonicalSHA is a commit id as opsbot keys decisions, pins and statuses:
// lower-case, full length (40 hex digits, or 64 in a SHA-256 repository).
// ok is false for anything else, a short SHA included: a prefix may name
// more than one commit and never equals the head GitHub names.
func CanonicalSHA(s string) (sha string, ok bool) {
	sha = strings.ToLower(strings.TrimSpace(s))
	return sha, ghclient.FullSHA(sha) // one rule: the merge's route reads a group's commit with it too
}

// Answer decides (or reads) for a pull_request ask, or resolves a push.
func (a *API) Answer(ctx context.Context, r Request) (Answer, error) {
	if r.Event == "" {
		r.Event = "pull_request"
	}
	if r.Repo == "" || r.SHA == "" {
		return Answer{}, fmt.Errorf("%w: repo and a commit sha are required", ErrBadAsk)
	}
	sha, ok := CanonicalSHA(r.SHA)
	if !ok {
		return Answer{}, fmt.Errorf("%w: sha %q is not a full commit SHA: send all 40 hex digits "+
			"(github.event.pull_request.head.sha, or github.sha for a push); a short SHA is refused", ErrBadAsk, clip(r.SHA, 80))
	}
	r.SHA = sha
	rc, ok := a.Gate.Cfg.Get().Repo(r.Repo)
	if !ok {
		return Answer{}, fmt.Errorf("%w: %s", ErrUnknownRepo, r.Repo)
	}
	r.Repo = rc.Name
	switch r.Event {
	case "pull_request", "pull_request_target":
	case "push":
		return a.push(ctx, r)
	case "merge_group":
		return a.group(ctx, r)
	default:
		return Answer{}, fmt.Errorf("%w: event %q (use pull_request, push or merge_group)", ErrBadAsk, r.Event)
	}
	if r.PR <= 0 {
		return Answer{}, fmt.Errorf("%w: a pull_request ask needs the PR number", ErrBadAsk)
	}
	if r.Action == "" {
		r.Action = "synchronize"
	}
	if !rc.IsGateAction(r.Action) {
		// A label event restarts the sweep, whatever is stored for the head.
		d, err := a.Gate.Decide(ctx, Ask{Repo: r.Repo, PR: r.PR, SHA: r.SHA, Action: r.Action, Source: "api"})
		if err != nil {
			return Answer{}, err
		}
		return FromDecision(r, d), nil
	}
	// A head already decided is answered from the store at once.
	if d, err := a.Gate.Store.Decision(r.Repo, r.PR, r.SHA); err != nil || d != nil {
		if err != nil {
			return Answer{}, err
		}
		return FromDecision(r, d), nil
	}
	if a.Quiet != nil {
		wait := a.QuietWait
		if wait <= 0 {
			wait = 10 * time.Second
		}
		qctx, cancel := context.WithTimeout(ctx, wait)
		err := a.Quiet(qctx, r.Repo, r.PR)
		cancel()
		if err != nil {
			return Answer{}, fmt.Errorf("%w after %v: nothing was decided; ask again", ErrBusy, wait)
		}
	}
	info, err := a.Gate.Store.PRInfo(r.Repo, r.PR)
	if err != nil {
		return Answer{}, err
	}
	if info == nil {
		// No webhook of the PR ever came, so no comment pinned anything
		// on it: answered without reading GitHub, deciding nothing.
		return Answer{Repo: r.Repo, PR: r.PR, SHA: r.SHA, Event: r.Event, Decision: state.Sweep, UnknownPR: true,
			Reason: fmt.Sprintf("opsbot has no record of PR #%d (no webhook of it reached opsbot), so nothing authorizes a skip; "+
				"nothing was decided", r.PR)}, nil
	}
	inst := info.Installation
	missKey := fmt.Sprintf("pr\x00%s\x00%s\x00%d\x00%s", r.Asker, r.Repo, r.PR, r.SHA)
	if why, ok := a.misses.get(missKey, a.now()); ok && !strings.EqualFold(info.HeadSHA, r.SHA) {
		// Asked again before MissTTL passed, and no push of it came since.
		return Answer{Repo: r.Repo, PR: r.PR, SHA: r.SHA, Event: r.Event, Decision: state.Sweep, NotHead: true, Reason: why}, nil
	}
	// The PR as one read of GitHub gives it, when the asked commit is not
	// the head its webhooks carried: its head, labels and draft flag then.
	var read *github.PullRequest
	if !strings.EqualFold(info.HeadSHA, r.SHA) || !info.LabelsKnown {
		if read, err = a.readPR(ctx, r); err != nil {
			return Answer{}, err
		}
	}
	if head := headOf(info, read); !strings.EqualFold(head, r.SHA) {
		// Only the head is decided: an ask for another commit must not use
		// up the pin that the real push is waiting for.
		why := fmt.Sprintf("commit %s is not the head of PR #%d (%s is); only the head's sweep can be skipped, and this ask used up nothing",
			mdtext.ShortSHA(r.SHA), r.PR, mdtext.ShortSHA(head))
		a.misses.put(missKey, why, a.now())
		return Answer{Repo: r.Repo, PR: r.PR, SHA: r.SHA, Event: r.Event, Decision: state.Sweep, NotHead: true, Reason: why}, nil
	}
	ask := Ask{Repo: r.Repo, PR: r.PR, SHA: r.SHA, Action: r.Action, Source: "api", Installation: inst,
		Labels: info.Labels, Draft: info.Draft, LabelsKnown: true}
	if read != nil {
		// Labels as they are now, with the head GitHub gave: the webhook
		// that carried them may be older than the push asked about.
		ask.Labels, ask.Draft = runs.PRLabels(read), read.GetDraft()
	}
	d, err := a.Gate.Decide(ctx, ask)
	if err != nil {
		return Answer{}, err
	}
	return FromDecision(r, d), nil
}

// group answers a merge group's ask: the PR its branch names, decided as
// Gate.Group does. The ref comes from the asker, so it proves nothing: a
// skip needs the group's files to be a skipped head's, whatever PR the
// ref names.
func (a *API) group(ctx context.Context, r Request) (Answer, error) {
	pr, base, ok := ghclient.GroupPR(r.Ref)
	if !ok {
		return Answer{}, fmt.Errorf("%w: ref %q is not a merge group's branch (gh-readonly-queue/<base>/pr-<N>-<sha>): "+
			"send github.event.merge_group.head_ref", ErrBadAsk, clip(r.Ref, 120))
	}
	if r.PR != 0 && r.PR != pr {
		return Answer{}, fmt.Errorf("%w: the ask names PR #%d, its merge group's branch PR #%d", ErrBadAsk, r.PR, pr)
	}
	if a.Finder == nil {
		return Answer{}, errors.New("gate: no GitHub client to read the merge group")
	}
	f, err := a.Finder(r.Repo)
	if err != nil {
		return Answer{}, err
	}
	d, _, err := a.Gate.Group(ctx, f, r.Repo, pr, base, r.SHA)
	if err != nil {
		return Answer{}, err
	}
	r.PR = pr
	return FromDecision(r, d), nil
}

// readPR reads the PR on GitHub.
func (a *API) readPR(ctx context.Context, r Request) (*github.PullRequest, error) {
	if a.Finder == nil {
		return nil, errors.New("gate: no GitHub client to read the PR")
	}
	f, err := a.Finder(r.Repo)
	if err != nil {
		return nil, err
	}
	pr, err := f.PullRequest(ctx, r.Repo, r.PR)
	if err != nil {
		return nil, fmt.Errorf("reading PR #%d: %w", r.PR, err)
	}
	return pr, nil
}

// headOf is the PR's head: as GitHub gave it when it was read, else the
// head of the last opened, reopened or synchronize webhook.
func headOf(info *state.PRInfo, read *github.PullRequest) string {
	if read != nil {
		return read.GetHead().GetSHA()
	}
	return info.HeadSHA
}

// FromDecision shapes a decision for the workflow.
func FromDecision(r Request, d *state.Decision) Answer {
	d = Effective(d)
	ans := Answer{Repo: d.Repo, PR: d.PR, SHA: d.HeadSHA, Event: r.Event, Decision: d.Decision, Reason: d.Reason,
		DecidedAt: d.DecidedAt, NotGated: NotGated(d)}
	if d.Decision == state.Skip {
		ans.SkipPRSweep, ans.ReuseEnabled = true, true
		ans.RunID, ans.RunAttempt, ans.RunURL, ans.RunHeadSHA = d.RunID, d.RunAttempt, d.RunURL, d.RunSHA
		ans.SourcePR, ans.PinID, ans.AuthorizedBy = d.PR, d.PinID, d.ActorLogin
	}
	return ans
}

// push resolves a push to the default branch: the PR it merged, and the run
// that stood in for that PR's final head (or its merge commit).
func (a *API) push(ctx context.Context, r Request) (Answer, error) {
	ans := Answer{Repo: r.Repo, SHA: r.SHA, Event: "push"}
	if a.Finder == nil {
		return ans, errors.New("gate: no GitHub client to resolve a push")
	}
	f, err := a.Finder(r.Repo)
	if err != nil {
		return ans, err
	}
	missKey := "push\x00" + r.Asker + "\x00" + r.Repo + "\x00" + r.SHA
	if why, ok := a.misses.get(missKey, a.now()); ok {
		ans.Reason = why
		return ans, nil
	}
	prs, err := f.PullRequestsForCommit(ctx, r.Repo, r.SHA)
	if err != nil {
		return ans, fmt.Errorf("finding the PR merged by %s: %w", r.SHA, err)
	}
	var merged *github.PullRequest
	for _, p := range prs {
		if strings.EqualFold(p.GetMergeCommitSHA(), r.SHA) || (merged == nil && p.GetMerged()) {
			merged = p
		}
	}
	if merged == nil {
		ans.Reason = fmt.Sprintf("commit %s merged no pull request", mdtext.ShortSHA(r.SHA))
		a.misses.put(missKey, ans.Reason, a.now())
		return ans, nil
	}
	ans.PR = merged.GetNumber()
	if rc, ok := a.Gate.Cfg.Get().Repo(r.Repo); ok {
		if rej := runs.LabelRejection(ans.PR, rc.Reuse.Judge(runs.PRLabels(merged), false)); rej != nil {
			ans.Reason = "no reuse: " + rej.Reason
			return ans, nil
		}
	}
	for _, sha := range []string{r.SHA, merged.GetHead().GetSHA()} {
		d, err := a.Gate.Store.Decision(r.Repo, ans.PR, sha)
		if err != nil {
			return ans, err
		}
		if d == nil {
			continue
		}
		if d.Decision == state.Skip {
			// The run the skip reused covers the head's files, whether or not
			// someone asked for its sweep after all.
			raw := *d
			raw.OverriddenBy = ""
			out := FromDecision(r, &raw)
			out.SHA, out.Decision, out.SkipPRSweep = r.SHA, "", false
			out.Reason = fmt.Sprintf("PR #%d's final head %s reused run %d, authorized by @%s", ans.PR, mdtext.ShortSHA(d.HeadSHA), d.RunID, d.ActorLogin)
			if d.MergeOf {
				// The merge itself consumed the pin: name the head that was decided.
				out.Reason = fmt.Sprintf("the merge of PR #%d (head %s) reused run %d, authorized by @%s", ans.PR,
					mdtext.ShortSHA(merged.GetHead().GetSHA()), d.RunID, d.ActorLogin)
			}
			return out, nil
		}
		ans.Reason = fmt.Sprintf("PR #%d's final head %s ran its own sweep (%s)", ans.PR, mdtext.ShortSHA(d.HeadSHA), d.Reason)
		return a.ownSweep(ctx, r, ans, merged)
	}
	ans.Reason = fmt.Sprintf("opsbot made no decision for PR #%d's final head %s", ans.PR, mdtext.ShortSHA(merged.GetHead().GetSHA()))
	return a.ownSweep(ctx, r, ans, merged)
}

// ownSweep answers a push whose merged PR's final head reused nothing: in
// a repository whose pushes to the default branch do not sweep
// (main_sweeps: false), the final head's own real sweep, validated as a
// reuse is, is the run whose results the default branch takes; else ans
// as it is, reuse-enabled=false with its reason.
func (a *API) ownSweep(ctx context.Context, r Request, ans Answer, merged *github.PullRequest) (Answer, error) {
	rc, ok := a.Gate.Cfg.Get().Repo(r.Repo)
	if !ok || rc.SweepsOnMain() {
		return ans, nil
	}
	head := strings.ToLower(merged.GetHead().GetSHA())
	var inst int64
	if info, err := a.Gate.Store.PRInfo(r.Repo, ans.PR); err != nil {
		return ans, err
	} else if info != nil {
		inst = info.Installation
	}
	v, err := a.Gate.Validators(inst)
	if err != nil {
		return ans, err
	}
	rules := runs.RulesFor(rc, runs.ForBarePin)
	rules.NewHead = head // the labels are judged again, now and when the run was made
	run, err := v.Newest(ctx, rules, ans.PR)
	if rej, ok := runs.IsRejection(err); ok {
		ans.Reason += fmt.Sprintf("; and no real sweep of that head can stand in: %s", rej.Reason)
		return ans, nil
	}
	if err != nil {
		return ans, fmt.Errorf("finding the sweep of PR #%d's final head %s: %w", ans.PR, mdtext.ShortSHA(head), err)
	}
	if !strings.EqualFold(run.HeadSHA, head) {
		ans.Reason += fmt.Sprintf("; and the final head has no real sweep of its own (the newest that qualifies, run %d, ran on %s)",
			run.ID, mdtext.ShortSHA(run.HeadSHA))
		return ans, nil
	}
	ans.ReuseEnabled = true
	ans.RunID, ans.RunAttempt, ans.RunURL, ans.RunHeadSHA, ans.SourcePR = run.ID, run.Attempt, run.URL, run.HeadSHA, ans.PR
	ans.Reason = fmt.Sprintf("PR #%d's final head %s ran its own sweep, run %d, whose results the default branch takes (main_sweeps: false)",
		ans.PR, mdtext.ShortSHA(head), run.ID)
	return ans, nil
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// MissTTL is how long an answer that read GitHub and found nothing to use
// (a commit that is not the PR's head, a push that merged no PR) is given
// again without reading GitHub: asks for made-up commits cost one read each
// per minute at most, and the gate's own asks (one per push) never wait on it.
const MissTTL = time.Minute

// missMax bounds the misses remembered; past it the oldest go.
const missMax = 4096

// missCache remembers negative answers for MissTTL.
type missCache struct {
	mu    sync.Mutex
	items map[string]miss
	order []string
}

type miss struct {
	why string
	at  time.Time
}

func (c *missCache) get(k string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.items[k]
	if !ok || now.Sub(m.at) >= MissTTL || now.Before(m.at) {
		return "", false
	}
	return m.why, true
}

func (c *missCache) put(k, why string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items = map[string]miss{}
	}
	if _, ok := c.items[k]; !ok {
		c.order = append(c.order, k)
	}
	c.items[k] = miss{why: why, at: now}
	for len(c.order) > missMax {
		delete(c.items, c.order[0])
		c.order = c.order[1:]
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// OutputNames are the step outputs the workflow reads, in the order written.
var OutputNames = []string{"skip-pr-sweep", "reuse-enabled", "reuse-source-run-id", "reuse-source-run-attempt",
	"reuse-source-run-url", "reuse-source-pr-number", "reuse-source-head-sha", "reuse-reason"}

// Outputs are the answer's step outputs, by name.
func (a Answer) Outputs() map[string]string {
	v := map[string]string{
		"skip-pr-sweep": strconv.FormatBool(a.SkipPRSweep),
		"reuse-enabled": strconv.FormatBool(a.ReuseEnabled),
		"reuse-reason":  a.Reason,
	}
	if a.RunID != 0 {
		v["reuse-source-run-id"] = strconv.FormatInt(a.RunID, 10)
		v["reuse-source-run-attempt"] = strconv.Itoa(max(a.RunAttempt, 1))
		v["reuse-source-run-url"] = a.RunURL
		v["reuse-source-pr-number"] = strconv.Itoa(a.SourcePR)
		v["reuse-source-head-sha"] = a.RunHeadSHA
	}
	return v
}

// FailedOutputs are the outputs of an ask that got no answer: the sweep runs.
func FailedOutputs(reason string) map[string]string {
	return map[string]string{"skip-pr-sweep": "false", "reuse-enabled": "false", "reuse-reason": reason}
}

// OutputLines writes every output as a key=value line ready for
// $GITHUB_OUTPUT, in OutputNames order; a value's CRs and newlines become
// spaces, so no value can add an output of its own.
func OutputLines(values map[string]string) string {
	var b strings.Builder
	for _, k := range OutputNames {
		fmt.Fprintf(&b, "%s=%s\n", k, OneLine(values[k]))
	}
	return b.String()
}

// OneLine keeps a value on one output line, and makes sure the line holds
// no workflow command: the runner reads `::command::` at a line's start and
// its legacy parser `##[command]` anywhere in a line, and a value may quote
// text others chose (a file name in a PR), so every `##[` becomes `# #[` and
// every `::` becomes `: :`, but in an IPv6 address in brackets (a URL's
// host: `http://[::1]:9`), whose digits and colons spell no command.
func OneLine(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	var b strings.Builder
	rest := s
	for {
		loc := ipv6Literal.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(noCommand(rest))
			break
		}
		b.WriteString(noCommand(rest[:loc[0]]))
		b.WriteString(rest[loc[0]:loc[1]])
		rest = rest[loc[1]:]
	}
	if out := b.String(); !strings.Contains(out, "##[") {
		return out
	}
	return noCommand(s) // `##` before an address's bracket
}

// ipv6Literal is an IPv6 address in brackets, with its zone.
var ipv6Literal = regexp.MustCompile(`\[[0-9A-Fa-f:.]*::?[0-9A-Fa-f:.]*(%25[0-9A-Za-z._~-]+|%[0-9A-Za-z._~-]+)?\]`)

func noCommand(s string) string {
	for strings.Contains(s, "##[") || strings.Contains(s, "::") {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "##[", "# #["), "::", ": :")
	}
	return s
}
