// Package ghclient is opsbot's GitHub edge: go-github with retries, rate
// limits, conditional requests and metrics, the reads run validation needs,
// and the writes outbox/ghsend makes. It imports neither the store nor the
// outbox (Clients reads remembered installations through an interface), so
// run validation links no bbolt. Repositories are "OWNER/REPO".
package ghclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit"
	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit/github_secondary_ratelimit"
	"github.com/google/go-github/v62/github"

	"opsbot/auth"
	"opsbot/mdtext"
	"opsbot/metrics"
)

// ErrNotFound is what a read answers when GitHub has no such object.
var ErrNotFound = errors.New("ghclient: not found")

// Options configure a Client.
type Options struct {
	APIURL         string
	Token          auth.Secret
	AppID          int64
	InstallationID int64
	AppKey         []byte
	UserAgent      string
	RequestTimeout time.Duration
	Metrics        *metrics.Metrics
	Log            *slog.Logger
	DryRun         bool
	// Retries bound the retry transport; zero values take the defaults
	// (4 tries, 30 s, waiting out a rate-limit reset up to 60 s away).
	MaxTries   int
	MaxElapsed time.Duration
	NearReset  time.Duration
	// Sleep replaces the retry back-off's wait (tests); nil sleeps.
	Sleep func(ctx context.Context, d time.Duration) error
	// SecondarySleepLimit bounds one wait on a secondary rate limit (Retry-After); default 60 s.
	SecondarySleepLimit time.Duration
}

// Client talks to GitHub for one identity (a token, or one App installation).
type Client struct {
	gh     *github.Client
	dryRun bool
	log    *slog.Logger

	mu          sync.Mutex
	workflowIDs map[string]int64
	self        *selfRef // opsbot's own account, once learned
}

// Factory hands out clients: one for a token, one per installation for a
// GitHub App whose installation comes from each webhook.
type Factory struct {
	opt     Options
	mu      sync.Mutex
	clients map[int64]*Client
	self    selfRef
}

// NewFactory checks the options and prepares clients.
func NewFactory(opt Options) (*Factory, error) {
	if opt.APIURL == "" {
		opt.APIURL = "https://api.github.com/"
	}
	if _, err := url.Parse(opt.APIURL); err != nil {
		return nil, fmt.Errorf("github.api_url: %w", err)
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.AppID != 0 && len(opt.AppKey) == 0 {
		return nil, errors.New("github.app: a private key is required")
	}
	f := &Factory{opt: opt, clients: map[int64]*Client{}}
	if opt.AppID != 0 {
		// Fail at start on a bad key, not at the first webhook.
		if _, err := ghinstallation.NewAppsTransport(http.DefaultTransport, opt.AppID, opt.AppKey); err != nil {
			return nil, fmt.Errorf("github.app.private_key_file: %w", err)
		}
	}
	return f, nil
}

// DryRun reports whether writes are only logged.
func (f *Factory) DryRun() bool { return f.opt.DryRun }

// Identity is the account a notice of installation id is sent as: 0 for a
// token or an App with a configured installation, else the installation.
// GitHub's secondary rate limits count per identity.
func (f *Factory) Identity(installationID int64) int64 {
	if f.opt.AppID == 0 || f.opt.InstallationID != 0 {
		return 0
	}
	return installationID
}

// For returns the client for an installation id (from a webhook's
// installation.id); with a token, or an App with a configured installation,
// the id is ignored.
func (f *Factory) For(installationID int64) (*Client, error) {
	if f.opt.AppID == 0 || f.opt.InstallationID != 0 {
		installationID = 0
	} else if installationID == 0 {
		return nil, errors.New("ghclient: the webhook names no installation and github.app.installation_id is not set")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.clients[installationID]; c != nil {
		return c, nil
	}
	c, err := newClient(f.opt, installationID)
	if err != nil {
		return nil, err
	}
	c.self = &f.self
	f.clients[installationID] = c
	return c, nil
}

func newClient(opt Options, installationID int64) (*Client, error) {
	timeout := opt.RequestTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	ua := opt.UserAgent
	if ua == "" {
		ua = "opsbot"
	}
	var authed http.RoundTripper = tokenTransport{base: base, token: opt.Token.Reveal(), ua: ua}
	if opt.AppID != 0 {
		inst := opt.InstallationID
		if inst == 0 {
			inst = installationID
		}
		tr, err := ghinstallation.New(tokenTransport{base: base, ua: ua}, opt.AppID, inst, opt.AppKey)
		if err != nil {
			return nil, fmt.Errorf("github app: %w", err)
		}
		tr.BaseURL = strings.TrimSuffix(opt.APIURL, "/")
		authed = tr
	}
	secondaryLimit := opt.SecondarySleepLimit
	if secondaryLimit == 0 {
		secondaryLimit = time.Minute
	}
	limited := github_ratelimit.New(clampTransport{base: metricsTransport{base: rewindTransport{base: authed}, m: opt.Metrics}},
		github_secondary_ratelimit.WithSingleSleepLimit(secondaryLimit, nil),
		github_secondary_ratelimit.WithTotalSleepLimit(5*secondaryLimit, nil))
	rt := &retryTransport{
		base:       &etagTransport{base: limited, max: 2048, cache: map[string]*cached{}},
		maxTries:   defaultInt(opt.MaxTries, 4),
		maxElapsed: defaultDur(opt.MaxElapsed, 30*time.Second),
		nearReset:  defaultDur(opt.NearReset, time.Minute),
		initial:    250 * time.Millisecond,
		sleep:      opt.Sleep,
	}
	if rt.sleep == nil {
		rt.sleep = sleepCtx
	}
	gh := github.NewClient(&http.Client{Transport: rt})
	u, err := url.Parse(opt.APIURL)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	gh.BaseURL = u
	gh.UserAgent = ua
	return &Client{gh: gh, dryRun: opt.DryRun, log: opt.Log, workflowIDs: map[string]int64{}}, nil
}

func defaultInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func defaultDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

func split(repo string) (string, string) {
	o, r, _ := strings.Cut(repo, "/")
	return o, r
}

// wrap turns a go-github error into ErrNotFound where GitHub said 404, and
// names the call otherwise.
func wrap(what string, resp *github.Response, err error) error {
	if err == nil {
		return nil
	}
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return fmt.Errorf("%s: %w", what, rl)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ---- Reads ----

// paginate reads a list GitHub serves in pages. fetch reads the page opt
// names (the first while opt.Page is 0); visit sees each page's items and
// says whether to read on. paginate stops when GitHub names no next page,
// when visit says stop, or after maxPages pages, whichever comes first (the
// cap keeps a list without end from holding a delivery). An error is
// wrapped as what failed, like every read.
func paginate[T any](what string, opt *github.ListOptions, maxPages int,
	fetch func() ([]T, *github.Response, error), visit func([]T) bool) error {
	for range maxPages {
		items, resp, err := fetch()
		if err := wrap(what, resp, err); err != nil {
			return err
		}
		if !visit(items) || resp.NextPage == 0 {
			return nil
		}
		opt.Page = resp.NextPage
	}
	return nil
}

// Permission reads a user's permission on a repository, raw, for auth to rank.
func (c *Client) Permission(ctx context.Context, repo, login string) (auth.PermissionResponse, error) {
	o, r := split(repo)
	var out auth.PermissionResponse
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
		url.PathEscape(o), url.PathEscape(r), url.PathEscape(login)), nil)
	if err != nil {
		return out, err
	}
	resp, err := c.gh.Do(ctx, req, &out)
	err = wrap("reading the permission of "+login, resp, err)
	if errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("%w: %w", auth.ErrNoSuchUser, err)
	}
	return out, err
}

// UserID reads the id of the account that holds login now; ErrNotFound
// when no account does.
func (c *Client) UserID(ctx context.Context, login string) (int64, error) {
	u, resp, err := c.gh.Users.Get(ctx, login)
	if err := wrap("reading the account "+login, resp, err); err != nil {
		return 0, err
	}
	return u.GetID(), nil
}

// TeamMember reports whether login is an active member of team ORG/SLUG
// (GitHub counts child teams' members).
func (c *Client) TeamMember(ctx context.Context, team, login string) (bool, error) {
	org, slug := split(team)
	m, resp, err := c.gh.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
	if err := wrap("reading team "+team, resp, err); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return m.GetState() == "active", nil
}

// WorkflowID returns the id of the workflow at path (.github/workflows/FILE),
// remembered for the process's life.
func (c *Client) WorkflowID(ctx context.Context, repo, workflowPath string) (int64, error) {
	key := strings.ToLower(repo) + "\x00" + workflowPath
	c.mu.Lock()
	id, ok := c.workflowIDs[key]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	o, r := split(repo)
	wf, resp, err := c.gh.Actions.GetWorkflowByFileName(ctx, o, r, path.Base(workflowPath))
	if err := wrap("reading workflow "+workflowPath, resp, err); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.workflowIDs[key] = wf.GetID()
	c.mu.Unlock()
	return wf.GetID(), nil
}

// Run reads a workflow run.
func (c *Client) Run(ctx context.Context, repo string, id int64) (*github.WorkflowRun, error) {
	o, r := split(repo)
	run, resp, err := c.gh.Actions.GetWorkflowRunByID(AfterWebhook(ctx), o, r, id)
	return run, wrap(fmt.Sprintf("reading run %d", id), resp, err)
}

// Artifacts lists every artifact of a run.
func (c *Client) Artifacts(ctx context.Context, repo string, runID int64) ([]*github.Artifact, error) {
	o, r := split(repo)
	var all []*github.Artifact
	opt := &github.ListOptions{PerPage: 100}
	err := paginate(fmt.Sprintf("listing the artifacts of run %d", runID), opt, 20,
		func() ([]*github.Artifact, *github.Response, error) {
			list, resp, err := c.gh.Actions.ListWorkflowRunArtifacts(ctx, o, r, runID, opt)
			if err != nil {
				return nil, resp, err
			}
			return list.Artifacts, resp, nil
		},
		func(page []*github.Artifact) bool { all = append(all, page...); return true })
	if err != nil {
		return nil, err
	}
	return all, nil
}

// PullRequest reads a PR.
func (c *Client) PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error) {
	o, r := split(repo)
	pr, resp, err := c.gh.PullRequests.Get(AfterWebhook(ctx), o, r, n)
	return pr, wrap(fmt.Sprintf("reading PR #%d", n), resp, err)
}

// PRCommits lists the SHAs of a PR's commits, all pages (GitHub lists at most 250).
func (c *Client) PRCommits(ctx context.Context, repo string, n int) ([]string, error) {
	o, r := split(repo)
	var out []string
	opt := &github.ListOptions{PerPage: 100}
	err := paginate(fmt.Sprintf("listing the commits of PR #%d", n), opt, 10,
		func() ([]*github.RepositoryCommit, *github.Response, error) {
			return c.gh.PullRequests.ListCommits(ctx, o, r, n, opt)
		},
		func(page []*github.RepositoryCommit) bool {
			for _, cm := range page {
				out = append(out, cm.GetSHA())
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Comparison is what the compare API says of base...head.
type Comparison struct {
	Status  string // identical, ahead, behind, diverged
	AheadBy int
	Files   []string
	// FilesComplete is false when GitHub truncated the file list (300 files).
	FilesComplete bool
}

// Compare compares two commits.
func (c *Client) Compare(ctx context.Context, repo, base, head string) (Comparison, error) {
	o, r := split(repo)
	cmp, resp, err := c.gh.Repositories.CompareCommits(ctx, o, r, base, head, &github.ListOptions{PerPage: 100})
	if err := wrap(fmt.Sprintf("comparing %s...%s", mdtext.ShortSHA(base), mdtext.ShortSHA(head)), resp, err); err != nil {
		return Comparison{}, err
	}
	out := Comparison{Status: cmp.GetStatus(), AheadBy: cmp.GetAheadBy(), FilesComplete: len(cmp.Files) < 300}
	for _, f := range cmp.Files {
		out.Files = append(out.Files, f.GetFilename())
		if f.GetPreviousFilename() != "" {
			out.Files = append(out.Files, f.GetPreviousFilename())
		}
	}
	return out, nil
}

// WorkflowRuns lists runs of a workflow for a branch and event, newest
// first, at most max of them.
func (c *Client) WorkflowRuns(ctx context.Context, repo string, workflowID int64, branch, event string, max int) ([]*github.WorkflowRun, error) {
	o, r := split(repo)
	var out []*github.WorkflowRun
	opt := &github.ListWorkflowRunsOptions{Branch: branch, Event: event, ListOptions: github.ListOptions{PerPage: 100}}
	if max <= 0 {
		return nil, nil
	}
	err := paginate("listing the sweep runs of "+branch, &opt.ListOptions, max,
		func() ([]*github.WorkflowRun, *github.Response, error) {
			list, resp, err := c.gh.Actions.ListWorkflowRunsByID(ctx, o, r, workflowID, opt)
			if err != nil {
				return nil, resp, err
			}
			return list.WorkflowRuns, resp, nil
		},
		func(page []*github.WorkflowRun) bool { out = append(out, page...); return len(out) < max })
	if err != nil {
		return nil, err
	}
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// CommitRuns lists the workflow runs (every workflow) of a commit, at most
// 5 pages of 100.
func (c *Client) CommitRuns(ctx context.Context, repo, sha string) ([]*github.WorkflowRun, error) {
	o, r := split(repo)
	var out []*github.WorkflowRun
	opt := &github.ListWorkflowRunsOptions{HeadSHA: sha, ListOptions: github.ListOptions{PerPage: 100}}
	err := paginate("listing the runs of "+mdtext.ShortSHA(sha), &opt.ListOptions, 5,
		func() ([]*github.WorkflowRun, *github.Response, error) {
			list, resp, err := c.gh.Actions.ListRepositoryWorkflowRuns(ctx, o, r, opt)
			if err != nil {
				return nil, resp, err
			}
			return list.WorkflowRuns, resp, nil
		},
		func(page []*github.WorkflowRun) bool { out = append(out, page...); return true })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DefaultBranch reads a repository's default branch.
func (c *Client) DefaultBranch(ctx context.Context, repo string) (string, error) {
	o, r := split(repo)
	rp, resp, err := c.gh.Repositories.Get(ctx, o, r)
	if err := wrap("reading repository "+repo, resp, err); err != nil {
		return "", err
	}
	return rp.GetDefaultBranch(), nil
}

// PullsWithHead lists the repository's PRs, open and closed, whose head is
// label (OWNER:BRANCH), at most 5 pages of 100; more is an error (the caller
// cannot tell them all, and must fail closed).
func (c *Client) PullsWithHead(ctx context.Context, repo, label string) ([]*github.PullRequest, error) {
	o, r := split(repo)
	var out []*github.PullRequest
	opt := &github.PullRequestListOptions{State: "all", Head: label, ListOptions: github.ListOptions{PerPage: 100}}
	more := false
	err := paginate("listing the PRs of "+label, &opt.ListOptions, 5,
		func() ([]*github.PullRequest, *github.Response, error) {
			list, resp, err := c.gh.PullRequests.List(ctx, o, r, opt)
			if err == nil {
				more = resp.NextPage != 0
			}
			return list, resp, err
		},
		func(page []*github.PullRequest) bool { out = append(out, page...); return true })
	if err != nil {
		return nil, err
	}
	if more {
		return nil, fmt.Errorf("listing the PRs of %s: more than 500", label)
	}
	return out, nil
}

// PullRequestsForCommit lists the PRs a commit belongs to (or was merged by).
func (c *Client) PullRequestsForCommit(ctx context.Context, repo, sha string) ([]*github.PullRequest, error) {
	o, r := split(repo)
	prs, resp, err := c.gh.PullRequests.ListPullRequestsWithCommit(AfterWebhook(ctx), o, r, sha, nil)
	return prs, wrap("listing the PRs of "+mdtext.ShortSHA(sha), resp, err)
}

// LabelEvent is a label added to or removed from a PR.
type LabelEvent struct {
	Label string
	Added bool
	At    time.Time
}

// LabelEvents reads a PR's label timeline, all pages.
func (c *Client) LabelEvents(ctx context.Context, repo string, n int) ([]LabelEvent, error) {
	o, r := split(repo)
	var out []LabelEvent
	opt := &github.ListOptions{PerPage: 100}
	err := paginate(fmt.Sprintf("reading the timeline of PR #%d", n), opt, 20,
		func() ([]*github.Timeline, *github.Response, error) {
			return c.gh.Issues.ListIssueTimeline(ctx, o, r, n, opt)
		},
		func(page []*github.Timeline) bool {
			for _, e := range page {
				if (e.GetEvent() == "labeled" || e.GetEvent() == "unlabeled") && e.Label != nil {
					out = append(out, LabelEvent{Label: e.Label.GetName(), Added: e.GetEvent() == "labeled", At: e.GetCreatedAt().Time})
				}
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TimelineEvent is one event of a PR's timeline: its kind (closed,
// reopened, merged, base_ref_changed, head_ref_force_pushed, labeled, …)
// and when GitHub recorded it. Events GitHub dates by their commits
// (committed) have no time of GitHub's and are left out.
type TimelineEvent struct {
	Event string
	At    time.Time
}

// MaxTimelinePages is how many pages of a PR's timeline Timeline reads.
const MaxTimelinePages = 20

// Timeline reads a PR's timeline events, oldest first, every page up to
// MaxTimelinePages; a longer timeline is an error (what happened in it
// cannot be told, so whoever asked must fail closed).
func (c *Client) Timeline(ctx context.Context, repo string, n int) ([]TimelineEvent, error) {
	o, r := split(repo)
	var out []TimelineEvent
	opt := &github.ListOptions{PerPage: 100}
	for range MaxTimelinePages {
		evs, resp, err := c.gh.Issues.ListIssueTimeline(ctx, o, r, n, opt)
		if err := wrap(fmt.Sprintf("reading the timeline of PR #%d", n), resp, err); err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.CreatedAt == nil {
				continue
			}
			out = append(out, TimelineEvent{Event: e.GetEvent(), At: e.GetCreatedAt().Time})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
	return nil, fmt.Errorf("reading the timeline of PR #%d: more than %d pages", n, MaxTimelinePages)
}

// ReactedBy reports whether an account left one of opsbot's reactions
// (👍, 👎, 😕) on a PR comment. It reads every page of each of those kinds
// (others cannot hide it behind reactions of their own), up to 10 pages a
// kind; a comment with more than that of one kind counts as reacted to, so
// that a flood of reactions can never make an answered command look new.
func (c *Client) ReactedBy(ctx context.Context, repo string, commentID, userID int64) (bool, error) {
	o, r := split(repo)
	for _, content := range []string{"+1", "-1", "confused"} {
		found, full := false, true
		opt := &github.ListOptions{PerPage: 100}
		err := paginate(fmt.Sprintf("reading the reactions to comment %d", commentID), opt, 10,
			func() ([]*github.Reaction, *github.Response, error) {
				u := fmt.Sprintf("repos/%s/%s/issues/comments/%d/reactions?content=%s&per_page=%d&page=%d",
					url.PathEscape(o), url.PathEscape(r), commentID, url.QueryEscape(content), opt.PerPage, opt.Page)
				req, err := c.gh.NewRequest(http.MethodGet, u, nil)
				if err != nil {
					return nil, nil, err
				}
				var rs []*github.Reaction
				resp, err := c.gh.Do(ctx, req, &rs)
				if err == nil && resp.NextPage == 0 {
					full = false
				}
				return rs, resp, err
			},
			func(rs []*github.Reaction) bool {
				for _, x := range rs {
					if x.GetUser().GetID() == userID {
						found = true
						return false
					}
				}
				return true
			})
		if err != nil {
			return false, err
		}
		if found || full {
			return true, nil
		}
	}
	return false, nil
}

// ---- Writes ----

// CommentRef names a comment opsbot posted.
type CommentRef struct {
	ID  int64
	URL string
}

// CreateComment posts a PR comment.
func (c *Client) CreateComment(ctx context.Context, repo string, pr int, body string) (CommentRef, error) {
	if c.dryRun {
		c.log.Info("dry-run: would comment", "repo", repo, "pr", pr, "body", body)
		return CommentRef{}, nil
	}
	o, r := split(repo)
	cm, resp, err := c.gh.Issues.CreateComment(ctx, o, r, pr, &github.IssueComment{Body: github.String(body)})
	if err := wrap(fmt.Sprintf("commenting on PR #%d", pr), resp, err); err != nil {
		return CommentRef{}, err
	}
	return CommentRef{ID: cm.GetID(), URL: cm.GetHTMLURL()}, nil
}

// EditComment replaces a comment's body.
func (c *Client) EditComment(ctx context.Context, repo string, id int64, body string) error {
	if c.dryRun {
		c.log.Info("dry-run: would edit comment", "repo", repo, "comment", id, "body", body)
		return nil
	}
	o, r := split(repo)
	_, resp, err := c.gh.Issues.EditComment(ctx, o, r, id, &github.IssueComment{Body: github.String(body)})
	return wrap(fmt.Sprintf("editing comment %d", id), resp, err)
}

// FindComment looks for a comment of opsbot's on a PR whose body holds
// marker, newest first: GitHub lists a PR's comments oldest first, with no
// direction to ask for, so the pages are read from the last one the Link
// header names back to the first, at most 50 of them (the comment a retry
// looks for is recent). found is false when there is none. Only
// comments opsbot wrote count (Identity.Authored): a marker anyone else
// planted is ignored. Before opsbot knows its account it finds nothing.
func (c *Client) FindComment(ctx context.Context, repo string, pr int, marker string) (CommentRef, bool, error) {
	if c.dryRun {
		return CommentRef{}, false, nil
	}
	var self Identity
	if c.self != nil {
		if p := c.self.Load(); p != nil {
			self = *p
		}
	}
	if self.ID == 0 {
		return CommentRef{}, false, errors.New("ghclient: opsbot's own account is not known, so its earlier comment cannot be told from others'")
	}
	o, r := split(repo)
	get := func(page int) ([]listedComment, *github.Response, error) {
		req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/issues/%d/comments?per_page=100&page=%d",
			url.PathEscape(o), url.PathEscape(r), pr, page), nil)
		if err != nil {
			return nil, nil, err
		}
		var cs []listedComment
		resp, err := c.gh.Do(ctx, req, &cs)
		return cs, resp, wrap(fmt.Sprintf("listing the comments of PR #%d", pr), resp, err)
	}
	find := func(cs []listedComment) (CommentRef, bool) {
		for i := len(cs) - 1; i >= 0; i-- {
			if cm := cs[i]; self.Wrote(cm.User.ID, cm.viaApp()) && strings.Contains(cm.Body, marker) {
				return CommentRef{ID: cm.ID, URL: cm.HTMLURL}, true
			}
		}
		return CommentRef{}, false
	}
	first, resp, err := get(1)
	if err != nil {
		return CommentRef{}, false, err
	}
	const most = 50
	if resp.LastPage > 1 {
		for page := resp.LastPage; page > 1 && page > resp.LastPage-most+1; page-- {
			cs, _, err := get(page)
			if err != nil {
				return CommentRef{}, false, err
			}
			if ref, ok := find(cs); ok {
				return ref, true, nil
			}
		}
		ref, ok := find(first)
		return ref, ok, nil
	}
	// No last page named: read forward.
	for page, cs := 1, first; ; {
		if ref, ok := find(cs); ok {
			return ref, true, nil
		}
		if resp.NextPage == 0 || page >= most {
			return CommentRef{}, false, nil
		}
		page = resp.NextPage
		if cs, resp, err = get(page); err != nil {
			return CommentRef{}, false, err
		}
	}
}

// React adds a reaction (+1, -1, eyes, …) to a PR comment. Adding one that
// is there already is not an error.
func (c *Client) React(ctx context.Context, repo string, commentID int64, content string) error {
	if c.dryRun {
		c.log.Info("dry-run: would react", "repo", repo, "comment", commentID, "content", content)
		return nil
	}
	o, r := split(repo)
	_, resp, err := c.gh.Reactions.CreateIssueCommentReaction(ctx, o, r, commentID, content)
	return wrap(fmt.Sprintf("reacting to comment %d", commentID), resp, err)
}

// SetStatus sets a commit status. The description is cut to GitHub's 140 characters.
func (c *Client) SetStatus(ctx context.Context, repo, sha, state, description, targetURL, statusContext string) error {
	description = cutDescription(description)
	if c.dryRun {
		c.log.Info("dry-run: would set status", "repo", repo, "sha", sha, "state", state, "description", description)
		return nil
	}
	o, r := split(repo)
	st := &github.RepoStatus{State: github.String(state), Description: github.String(description), Context: github.String(statusContext)}
	if targetURL != "" {
		st.TargetURL = github.String(targetURL)
	}
	_, resp, err := c.gh.Repositories.CreateStatus(ctx, o, r, sha, st)
	return wrap("setting the status of "+mdtext.ShortSHA(sha), resp, err)
}

// cutDescription cuts a status description to GitHub's 140 characters,
// on a rune boundary (a cut inside a rune would reach GitHub as U+FFFD, and a
// retry's comparison with what it set would never match).
func cutDescription(d string) string {
	if len(d) <= 140 {
		return d
	}
	cut := 137
	for cut > 0 && !utf8.RuneStart(d[cut]) {
		cut--
	}
	return d[:cut] + "..."
}

// Dispatch sends a repository_dispatch event.
func (c *Client) Dispatch(ctx context.Context, repo, eventType string, payload map[string]any) error {
	if c.dryRun {
		c.log.Info("dry-run: would dispatch", "repo", repo, "event_type", eventType, "payload", payload)
		return nil
	}
	o, r := split(repo)
	raw, err := jsonRaw(payload)
	if err != nil {
		return err
	}
	_, resp, err := c.gh.Repositories.Dispatch(ctx, o, r, github.DispatchRequestOptions{EventType: eventType, ClientPayload: raw})
	return wrap("dispatching "+eventType+" to "+repo, resp, err)
}

func jsonRaw(v any) (*json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the dispatch payload: %w", err)
	}
	raw := json.RawMessage(b)
	return &raw, nil
}

// CommentBody reads a comment's body as GitHub has it now; ErrNotFound
// when the comment was deleted.
func (c *Client) CommentBody(ctx context.Context, repo string, id int64) (string, error) {
	o, r := split(repo)
	ic, resp, err := c.gh.Issues.GetComment(ctx, o, r, id)
	if err := wrap(fmt.Sprintf("reading comment %d", id), resp, err); err != nil {
		return "", err
	}
	return ic.GetBody(), nil
}

// CommentsSince lists the repository's issue and PR comments updated since t, oldest first, at most max.
func (c *Client) CommentsSince(ctx context.Context, repo string, t time.Time, max int) ([]*github.IssueComment, error) {
	o, r := split(repo)
	var out []*github.IssueComment
	opt := &github.IssueListCommentsOptions{Since: &t, Sort: github.String("created"), Direction: github.String("asc"),
		ListOptions: github.ListOptions{PerPage: 100}}
	if max <= 0 {
		return nil, nil
	}
	err := paginate("listing comments since "+t.UTC().Format(time.RFC3339), &opt.ListOptions, max,
		func() ([]*github.IssueComment, *github.Response, error) {
			return c.gh.Issues.ListComments(ctx, o, r, 0, opt)
		},
		func(page []*github.IssueComment) bool { out = append(out, page...); return len(out) < max })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HasStatus reports whether the newest status of context on sha already
// says state and description (a retry after a crash finds the one it set).
func (c *Client) HasStatus(ctx context.Context, repo, sha, statusContext, state, description string) (bool, error) {
	if c.dryRun {
		return false, nil
	}
	description = cutDescription(description)
	o, r := split(repo)
	sts, resp, err := c.gh.Repositories.ListStatuses(ctx, o, r, sha, &github.ListOptions{PerPage: 100})
	if err := wrap("listing the statuses of "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return false, err
	}
	for _, st := range sts {
		if st.GetContext() == statusContext {
			return st.GetState() == state && st.GetDescription() == description, nil
		}
	}
	return false, nil
}
