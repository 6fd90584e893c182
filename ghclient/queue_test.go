package ghclient

import (
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// The merge queue as /merge-with-reuse uses it: a branch's rules (none
// where GitHub has no rulesets), the PR added to its queue naming its head,
// read there, taken out; and GitHub's words when a merge must go through
// the queue.
func TestMergeQueue(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 7, "octocat", "feature/x", "b0", []string{"h1"})
	ctx := t.Context()
	pr, err := c.PullRequest(ctx, repo, 7)
	if err != nil {
		t.Fatal(err)
	}
	id := pr.GetNodeID()
	if rules, err := c.BranchRules(ctx, repo, "main"); err != nil || len(rules) != 0 {
		t.Fatalf("BranchRules(main) before any rule = %v, %v", rules, err)
	}
	if err := c.Enqueue(ctx, id, "h1"); !isRefusal(err, 0) {
		t.Fatalf("Enqueue where no queue is required = %v, want a refusal", err)
	}
	f.SetBranchRules(repo, "main", "merge_queue", "required_signatures")
	if rules, err := c.BranchRules(ctx, repo, "main"); err != nil || !slices.Equal(rules, []string{RuleMergeQueue, RuleRequiredSignatures}) {
		t.Fatalf("BranchRules(main) = %v, %v", rules, err)
	}
	if err := c.Enqueue(ctx, id, "h0"); !isRefusal(err, 0) {
		t.Fatalf("Enqueue naming another head = %v, want a refusal", err)
	}
	if e, err := c.QueueEntryOf(ctx, repo, 7); err != nil || e.State != "" {
		t.Fatalf("QueueEntryOf before the enqueue = %+v, %v", e, err)
	}
	if err := c.Enqueue(ctx, id, "h1"); err != nil {
		t.Fatal(err)
	}
	if e, err := c.QueueEntryOf(ctx, repo, 7); err != nil || e.State != "QUEUED" {
		t.Fatalf("QueueEntryOf after the enqueue = %+v, %v", e, err)
	}
	_, err = c.MergePR(ctx, repo, 7, "h1", "squash")
	if !QueueRequired(err) {
		t.Fatalf("MergePR on a queue-protected branch = %v, want the queue's refusal", err)
	}
	if err := c.Dequeue(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Dequeue(ctx, id); !isRefusal(err, 0) {
		t.Fatalf("Dequeue of a PR not queued = %v, want a refusal", err)
	}
	// A GitHub without rulesets answers 404: no rules.
	f.Inject("GET /repos/{owner}/{repo}/rules/branches/{branch...}", githubtest.Fault{Status: 404, Times: 1})
	if rules, err := c.BranchRules(ctx, repo, "main"); err != nil || len(rules) != 0 {
		t.Fatalf("BranchRules answered 404 = %v, %v; want none", rules, err)
	}
}

// GitHub's GraphQL endpoint beside the REST base URL: /graphql on
// api.github.com, /api/graphql on GitHub Enterprise Server.
func TestGraphQLURL(t *testing.T) {
	for base, want := range map[string]string{
		"https://api.github.com/":           "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3/":   "https://ghe.example.com/api/graphql",
		"http://127.0.0.1:8080/":            "http://127.0.0.1:8080/graphql",
		"https://proxy.example.com/github/": "https://proxy.example.com/github/graphql",
	} {
		u, _ := url.Parse(base)
		gh := github.NewClient(nil)
		gh.BaseURL = u
		if got := (&Client{gh: gh}).graphqlURL(); got != want {
			t.Errorf("graphqlURL(%s) = %s, want %s", base, got, want)
		}
	}
}
