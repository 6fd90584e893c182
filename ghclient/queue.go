package ghclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// The branch rules opsbot reads (GET /repos/{o}/{r}/rules/branches/{b}).
const (
	RuleMergeQueue         = "merge_queue"
	RuleRequiredSignatures = "required_signatures"
)

// BranchRules lists the types of the rules that apply to a branch (from
// every ruleset that targets it, merge_queue and required_signatures among
// them). Classic branch protection is not listed: GitHub answers the
// merge of a PR its merge queue must take with a refusal that says so
// (QueueRequired), and a push its rules refuse with a refusal too. A
// GitHub without rulesets (an older GitHub Enterprise Server) answers 404:
// no rules.
func (c *Client) BranchRules(ctx context.Context, repo, branch string) ([]string, error) {
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/rules/branches/%s?per_page=100", repo, url.PathEscape(branch)), nil)
	if err != nil {
		return nil, err
	}
	var rules []struct {
		Type string `json:"type"`
	}
	resp, err := c.gh.Do(ctx, req, &rules)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err := wrap("reading the rules of the branch "+branch, resp, err); err != nil {
		return nil, err
	}
	if resp.NextPage != 0 {
		return nil, fmt.Errorf("reading the rules of the branch %s: more than 100 rules", branch)
	}
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.Type)
	}
	return out, nil
}

// QueueRequired reports whether GitHub refused a merge because the base
// branch takes its merges through a merge queue.
func QueueRequired(err error) bool {
	var ref *Refusal
	return errors.As(err, &ref) && strings.Contains(strings.ToLower(ref.Message), "merge queue")
}

// graphqlURL is GitHub's GraphQL endpoint beside the REST base URL:
// https://api.github.com/graphql, or https://HOST/api/graphql for GitHub
// Enterprise Server (whose REST API is /api/v3/).
func (c *Client) graphqlURL() string {
	u := *c.gh.BaseURL
	if strings.HasSuffix(u.Path, "/api/v3/") {
		u.Path = strings.TrimSuffix(u.Path, "v3/") + "graphql"
	} else {
		u.Path += "graphql"
	}
	return u.String()
}

// graphqlError is one error of a GraphQL answer.
type graphqlError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// unknownOutcome are the GraphQL error types that say nothing of whether
// a mutation was made (GitHub timed out or failed inside): never a
// Refusal, so a write is decided by reading GitHub again.
var unknownOutcome = map[string]bool{"": true, "INTERNAL": true, "SERVICE_UNAVAILABLE": true, "TIMEOUT": true, "RATE_LIMITED": true}

// graphql posts one query (with accept as its Accept header when set). An
// answer with typed errors is a Refusal (GitHub read the query and would
// answer it the same way again); an untyped, internal or rate-limit error
// is an error whose outcome is unknown.
func (c *Client) graphql(ctx context.Context, what, query string, vars map[string]any, out any, accept ...string) error {
	req, err := c.gh.NewRequest(http.MethodPost, c.graphqlURL(), map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	for _, a := range accept {
		req.Header.Set("Accept", a)
	}
	var answer struct {
		Data   json.RawMessage `json:"data"`
		Errors []graphqlError  `json:"errors"`
	}
	resp, err := c.gh.Do(ctx, req, &answer)
	if err := refusal(what, resp, err); err != nil {
		return err
	}
	if len(answer.Errors) > 0 {
		var msgs []string
		unknown := false
		for _, e := range answer.Errors {
			msgs = append(msgs, e.Message)
			unknown = unknown || unknownOutcome[e.Type]
		}
		if unknown {
			return fmt.Errorf("%s: GitHub's GraphQL API failed, whether it acted is not known: %s", what, strings.Join(msgs, "; "))
		}
		return fmt.Errorf("%s: %w", what, &Refusal{GraphQL: true, Message: strings.Join(msgs, "; ")})
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(answer.Data, out); err != nil {
		return fmt.Errorf("%s: reading GitHub's answer: %w", what, err)
	}
	return nil
}

// Enqueue adds a PR (by its node id) to its base branch's merge queue,
// provided its head is still expectedHead (GitHub's enqueuePullRequest);
// a PR GitHub will not queue is a Refusal.
func (c *Client) Enqueue(ctx context.Context, nodeID, expectedHead string) error {
	if c.dryRun {
		c.log.Info("dry-run: would add the PR to the merge queue", "pr", nodeID, "expected_head_sha", expectedHead)
		return dryRunRefusal
	}
	const q = `mutation($pr: ID!, $head: GitObjectID) {
  enqueuePullRequest(input: {pullRequestId: $pr, expectedHeadOid: $head}) { mergeQueueEntry { state } }
}`
	return c.graphql(ctx, "adding the PR to the merge queue at "+mdtext.ShortSHA(expectedHead), q,
		map[string]any{"pr": nodeID, "head": expectedHead}, nil)
}

// Dequeue takes a PR (by its node id) out of its merge queue
// (dequeuePullRequest); a PR not in it is a Refusal.
func (c *Client) Dequeue(ctx context.Context, nodeID string) error {
	if c.dryRun {
		c.log.Info("dry-run: would take the PR out of the merge queue", "pr", nodeID)
		return dryRunRefusal
	}
	const q = `mutation($pr: ID!) { dequeuePullRequest(input: {id: $pr}) { mergeQueueEntry { state } } }`
	return c.graphql(ctx, "taking the PR out of the merge queue", q, map[string]any{"pr": nodeID}, nil)
}

// QueueEntry is a PR's place in its merge queue: its state (QUEUED,
// AWAITING_CHECKS, MERGEABLE, UNMERGEABLE, LOCKED) and position; State ""
// is a PR not in a queue.
type QueueEntry struct {
	State    string
	Position int
	// Added is how many times the PR's timeline shows it added to a
	// merge queue (by anyone).
	Added int
}

// QueueEntryOf reads a PR's merge queue entry.
func (c *Client) QueueEntryOf(ctx context.Context, repo string, n int) (QueueEntry, error) {
	const q = `query($owner: String!, $name: String!, $n: Int!) {
  repository(owner: $owner, name: $name) { pullRequest(number: $n) { mergeQueueEntry { state position } timelineItems(itemTypes: [ADDED_TO_MERGE_QUEUE_EVENT]) { totalCount } } }
}`
	o, r := split(repo)
	var out struct {
		Repository struct {
			PullRequest *struct {
				MergeQueueEntry *struct {
					State    string `json:"state"`
					Position int    `json:"position"`
				} `json:"mergeQueueEntry"`
				TimelineItems struct {
					TotalCount int `json:"totalCount"`
				} `json:"timelineItems"`
			} `json:"pullRequest"`
		} `json:"repository"`
	}
	what := fmt.Sprintf("reading the merge queue entry of PR #%d", n)
	if err := c.graphql(ctx, what, q, map[string]any{"owner": o, "name": r, "n": n}, &out); err != nil {
		return QueueEntry{}, err
	}
	if out.Repository.PullRequest == nil {
		return QueueEntry{}, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	added := out.Repository.PullRequest.TimelineItems.TotalCount
	e := out.Repository.PullRequest.MergeQueueEntry
	if e == nil {
		return QueueEntry{Added: added}, nil
	}
	return QueueEntry{State: e.State, Position: e.Position, Added: added}, nil
}

// groupRE is a merge group's branch: gh-readonly-queue/<base>/pr-<N>-<the
// base's tip>. Only GitHub's merge queue makes gh-readonly-queue branches.
var groupRE = regexp.MustCompile(`^(?:refs/heads/)?gh-readonly-queue/(.+)/pr-([1-9][0-9]{0,8})-(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// GroupPR is the PR and base branch a merge group's branch names (its
// head_ref); ok is false for any other ref.
func GroupPR(ref string) (pr int, base string, ok bool) {
	m := groupRE.FindStringSubmatch(strings.TrimSpace(ref))
	if m == nil {
		return 0, "", false
	}
	n, err := strconv.Atoi(m[2])
	return n, m[1], err == nil
}

var fullSHA = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// FullSHA reports whether sha is a whole commit id in lower case (SHA-1's
// 40 hex digits or SHA-256's 64).
func FullSHA(sha string) bool { return fullSHA.MatchString(sha) }
