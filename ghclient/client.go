// Package ghclient is opsbot's GitHub edge: go-github with retries, rate
// limits, conditional requests and metrics, the reads run validation needs,
// and the writes outbox/ghsend makes. It imports neither the store nor the
// outbox (Clients reads remembered installations through an interface), so
// run validation links no bbolt. Repositories are "OWNER/REPO".
package ghclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit"
	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit/github_secondary_ratelimit"
	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/metrics"
	"github.com/SemiAnalysisAI/opsbot/seq"
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
	// secondaryBudget is the client's budget of secondary waits (tests
	// give one with their clock); nil: one on the wall clock.
	secondaryBudget *sleepBudget
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
	var warm func(context.Context) error // an act's token, had before its last stop check
	if opt.Token.Reveal() == "" && opt.AppID == 0 {
		// No credentials (a dry run opsbot falls into): GitHub is asked
		// nothing, rather than asked without credentials (60 requests an
		// hour, and only what is public).
		authed = noCredentials{}
	}
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
		warm = func(ctx context.Context) error { _, err := tr.Token(ctx); return err }
	}
	secondaryLimit := opt.SecondarySleepLimit
	if secondaryLimit == 0 {
		secondaryLimit = time.Minute
	}
	budget := opt.secondaryBudget
	if budget == nil {
		budget = &sleepBudget{now: time.Now}
	}
	budget.single, budget.total, budget.window = secondaryLimit, 5*secondaryLimit, time.Hour
	limited := budgetTransport{budget: budget, base: github_ratelimit.New(
		clampTransport{base: lastCheckTransport{base: metricsTransport{base: rewindTransport{base: authed}, m: opt.Metrics}, warm: warm}},
		github_secondary_ratelimit.WithSingleSleepLimit(secondaryLimit, nil),
		github_secondary_ratelimit.WithLimitDetectedCallback(budget.waited))}
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
	err = notMade(err)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return fmt.Errorf("%s: %w", what, rl)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// sleepBudget bounds the waits on GitHub's secondary rate limits to a
// total per window (five single waits an hour): each request may wait as
// long as is left of it, at most one single wait (the limiter's single
// sleep limit, set per request by budgetTransport), and the limiter tells
// each wait it takes (waited). The limiter's own total is never lowered,
// so a client that had waited five times over a week would not wait again.
type sleepBudget struct {
	single, total, window time.Duration
	now                   func() time.Time
	mu                    sync.Mutex
	waits                 []sleptAt
}

type sleptAt struct {
	at time.Time
	d  time.Duration
}

// waited notes a wait the limiter takes.
func (b *sleepBudget) waited(c *github_secondary_ratelimit.CallbackContext) {
	if c.ResetTime == nil {
		return
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits = append(b.waits, sleptAt{at: now, d: max(0, time.Until(*c.ResetTime))})
}

// left is the longest wait a request may take now.
func (b *sleepBudget) left() time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits = slices.DeleteFunc(b.waits, func(w sleptAt) bool { return now.Sub(w.at) >= b.window })
	left := b.total
	for _, w := range b.waits {
		left -= w.d
	}
	return max(0, min(b.single, left))
}

// budgetTransport gives each request the secondary limiter's single sleep
// limit the budget leaves, read again at each limit the request meets (the
// limiter sends a request again after each wait it takes).
type budgetTransport struct {
	base   http.RoundTripper
	budget *sleepBudget
}

func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := github_secondary_ratelimit.WithOverrideConfig(req.Context(), func(c *github_secondary_ratelimit.Config) {
		github_secondary_ratelimit.WithSingleSleepLimit(t.budget.left(), nil)(c)
	})
	return t.base.RoundTrip(req.WithContext(ctx))
}

// notMade is err, told to an act (seq.Unsent) where it is a rate limit:
// go-github's own refusal of a request it never made (a limit it
// remembers from an earlier answer), or GitHub's answer that the request
// was refused under its primary or secondary limit. Either way the
// request was not taken, and an act's mark stays this process's.
func notMade(err error) error {
	var prl *github.RateLimitError
	var arl *github.AbuseRateLimitError
	var resp *http.Response
	switch {
	case errors.As(err, &prl):
		resp = prl.Response
	case errors.As(err, &arl):
		resp = arl.Response
	default:
		return err
	}
	if resp == nil || resp.Request == nil {
		return err
	}
	return seq.Unsent(resp.Request.Context(), err)
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

// ---- Writes ----

// ErrNoCredentials is a request opsbot did not send: it has no GitHub
// token and no App (github.token_env's variable is empty).
var ErrNoCredentials = errors.New("ghclient: no GitHub credentials (github.token_env's variable is empty and no github.app is set): GitHub is asked nothing")

// noCredentials refuses every request.
type noCredentials struct{}

func (noCredentials) RoundTrip(*http.Request) (*http.Response, error) { return nil, ErrNoCredentials }
