package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/go-github/v62/github"
)

// The files `opsbot github app-create` writes into --out.
const (
	appKeyFile     = "github-app-private-key.pem"
	appSecretFile  = "webhook-secret"
	appSnippetFile = "opsbot-github-app.yaml"
)

// maxAppName is the longest name GitHub takes for an App.
const maxAppName = 34

var (
	orgName     = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	manifestKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) // the temporary code GitHub hands back
)

// errAppNameTaken is GitHub refusing the App's name: App names are unique
// across GitHub.
var errAppNameTaken = errors.New("the App's name is already in use on GitHub")

// appCreate is one run of GitHub's manifest flow: the manifest, where the
// form posts it, and the state the redirect must carry back.
type appCreate struct {
	name   string
	org    string
	action string // GitHub's "new App from a manifest" URL, with ?state=
	state  string
	// token is in the URL printed to the terminal: only a browser that
	// opened it gets the page (and the state in it), and a session cookie
	// that the redirect back must carry.
	token, session string
	manifest       map[string]any
	api            *github.Client
	web            string // GitHub's web URL, with a trailing slash
	apiURL         string // with a trailing slash
	out            string // absolute
	root           string // opsbot's public base URL
}

func runAppCreate(e *env, args []string) error {
	fs := newFlags(e, "github app-create",
		"--url URL [--org ORG] [--out DIR] [--name NAME] [--staging] [--teams] [--merge] [--external] [--rerun] [--github-url URL] [--api-url URL] [--port N] [--timeout D] [--code CODE]",
		"opsbot github app-create --url https://opsbot.example.com --org SemiAnalysisAI --out /etc/opsbot/github",
		"opsbot github app-create --url https://opsbot.example.com --name opsbot-alice --staging --teams",
		"opsbot github app-create --url https://opsbot.example.com --org acme --github-url https://ghe.example.com/")
	base := fs.String("url", "", "opsbot's public base URL (the App's webhook goes to URL/webhook)")
	org := fs.String("org", "", "create the App in this organization (you must be one of its owners); default: your own account")
	out := fs.String("out", ".", "the directory for the App's private key, its webhook secret and the configuration snippet "+
		"(made 0700 if missing; files already there are never overwritten)")
	name := fs.String("name", "", "the App's name, unique across GitHub, at most 34 characters (default opsbot-ORG; required without --org)")
	staging := fs.Bool("staging", false, "also contents: write, for /stage-results dispatches")
	teams := fs.Bool("teams", false, "also members: read, for allow_teams")
	merge := fs.Bool("merge", false, "also contents: write, pull_requests: write, workflows: write and merge_queues: write, for "+
		"/merge-with-reuse (docs/commands.md#merging-with-reuse)")
	external := fs.Bool("external", false, "also actions: write, for /approve-sweep (dispatching the external PRs' workflow)")
	rerun := fs.Bool("rerun", false, "also actions: write, for /rerun-failed and /recover-ingest (re-running a merge's run, dispatching the recovery)")
	webURL := fs.String("github-url", "https://github.com/", "GitHub's web URL, where the manifest is posted (GitHub Enterprise Server: https://HOST/)")
	apiURL := fs.String("api-url", "", "GitHub's API URL, where the code is exchanged (default https://api.github.com/ for github.com, "+
		"else GITHUB-URL/api/v3/)")
	port := fs.Int("port", 0, "the loopback port of the page to open (default: any free port; set it to forward it over ssh -L)")
	timeout := fs.Duration("timeout", time.Hour, "how long to wait for GitHub to send the browser back (GitHub's flow must finish within an hour)")
	byHand := fs.String("code", "", "finish a run whose exchange of GitHub's code failed: exchange CODE (the one that run printed, good "+
		"for an hour) and write the files, with no browser")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usage := func(msg string) error {
		fmt.Fprintln(e.stderr, "opsbot github app-create: "+msg)
		return exitCode(2)
	}
	root, ok := publicBase(*base)
	if !ok {
		return usage("--url must be opsbot's public https:// base URL, such as https://opsbot.example.com")
	}
	if *org != "" && !orgName.MatchString(*org) {
		return usage(fmt.Sprintf("--org %q is not an organization's login (letters, digits and hyphens)", *org))
	}
	if *name == "" {
		if *org == "" {
			return usage("--name is required without --org: an App's name is unique across GitHub, so name it after its owner, " +
				"such as --name opsbot-YOURLOGIN")
		}
		*name = "opsbot-" + *org
	}
	if n := len([]rune(*name)); n > maxAppName || strings.TrimSpace(*name) == "" {
		return usage(fmt.Sprintf("the App's name %q is %d characters long; GitHub takes 1 to %d: pass a shorter --name", *name, n, maxAppName))
	}
	web, err := githubBaseURL(*webURL)
	if err != nil {
		return usage("--github-url: " + err.Error())
	}
	if *apiURL == "" {
		*apiURL = "https://api.github.com/"
		if web != "https://github.com/" {
			*apiURL = web + "api/v3/"
		}
	}
	api, err := githubBaseURL(*apiURL)
	if err != nil {
		return usage("--api-url: " + err.Error())
	}
	if u, _ := url.Parse(api); u.Scheme != "https" && !isLoopbackHost(u.Hostname()) {
		return usage("--api-url must be https:// (plain http only to this machine): GitHub's code, which is exchanged there " +
			"for the App's private key, must not cross the network in the clear")
	}
	if *timeout <= 0 {
		return usage("--timeout must be positive, such as 1h")
	}
	if *port < 0 || *port > 65535 {
		return usage("--port must be 0 (any free port) to 65535")
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return usage("--out: " + err.Error())
	}
	if err := prepareAppDir(dir); err != nil {
		return err
	}
	if *byHand != "" {
		// The browser's part was done by an earlier run: only the exchange
		// is left.
		if !manifestKey.MatchString(*byHand) {
			return usage("--code: not a code GitHub hands back (letters, digits, - and _)")
		}
		a := &appCreate{name: *name, org: *org, web: web, apiURL: api, out: dir, root: root,
			api: github.NewClient(&http.Client{Timeout: 30 * time.Second})}
		if a.api.BaseURL, err = url.Parse(api); err != nil {
			return usage("--api-url: " + err.Error())
		}
		ctx, cancel := context.WithTimeout(e.ctx, *timeout)
		defer cancel()
		res, err := a.finish(ctx, *byHand)
		if err != nil {
			return a.explain(e, *byHand, err)
		}
		a.printNext(e, res)
		return nil
	}

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listening on a loopback port for the page to open: %w (pick another --port)", err)
	}
	local := "http://" + ln.Addr().String() + "/"
	var state, token, session string
	for _, v := range []*string{&state, &token, &session} {
		if *v, err = randomHex(32); err != nil {
			ln.Close()
			return fmt.Errorf("making the flow's secrets: %w", err)
		}
	}
	a := &appCreate{name: *name, org: *org, state: state, token: token, session: session, web: web, apiURL: api, out: dir, root: root,
		manifest: appManifest(root, *name, appFeatures{staging: *staging, teams: *teams, merge: *merge, external: *external, rerun: *rerun})}
	a.manifest["redirect_url"] = local + "callback"
	a.action = web + "settings/apps/new?state=" + url.QueryEscape(state)
	if *org != "" {
		a.action = web + "organizations/" + url.PathEscape(*org) + "/settings/apps/new?state=" + url.QueryEscape(state)
	}
	a.api = github.NewClient(&http.Client{Timeout: 30 * time.Second})
	if a.api.BaseURL, err = url.Parse(api); err != nil {
		ln.Close()
		return usage("--api-url: " + err.Error())
	}

	ctx, cancel := context.WithTimeout(e.ctx, *timeout)
	defer cancel()
	codes := make(chan appCallback)
	stop := make(chan struct{})
	srv := &http.Server{Handler: a.handler(ln.Addr().String(), codes, stop, e), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		close(stop)
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()

	owner := "your account"
	if *org != "" {
		owner = "the organization " + *org + " (you must be one of its owners)"
	}
	fmt.Fprintf(e.stdout, "Open %s?t=%s in a browser signed in to GitHub (%s), to create the GitHub App %q for %s.\n", local, token, web, *name, owner)
	fmt.Fprintf(e.stdout, "The page posts opsbot's App manifest to GitHub; after you confirm, GitHub sends the browser back here.\n")
	fmt.Fprintf(e.stdout, "(On another machine, forward the port first: ssh -L %s:%s HOST, and pass the same --port.)\n",
		portOf(ln.Addr()), ln.Addr())
	fmt.Fprintf(e.stdout, "Waiting up to %s (Ctrl-C stops; nothing is written before GitHub sends the browser back).\n", *timeout)

	select {
	case cb := <-codes:
		res, err := a.finish(ctx, cb.code)
		cb.reply <- appResult{app: res, err: err}
		if err != nil {
			return a.explain(e, cb.code, err)
		}
		a.printNext(e, res)
		return nil
	case <-ctx.Done():
		if e.ctx.Err() != nil {
			return fmt.Errorf("stopped before GitHub sent the browser back: nothing was written (an App created on GitHub's page meanwhile " +
				"has no key here: delete it in its settings and run this again)")
		}
		return fmt.Errorf("GitHub did not send the browser back within %s: nothing was written; run this again "+
			"(and open the page it prints)", *timeout)
	}
}

// githubBaseURL checks a GitHub URL (http or https, a host) and returns it
// with a trailing slash.
func githubBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s) URL such as https://github.com/", raw)
	}
	return strings.TrimSuffix(raw, "/") + "/", nil
}

// appSessionCookie ties GitHub's redirect to the browser that opened the
// printed URL.
const appSessionCookie = "opsbot_app_create"

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// prepareAppDir makes dir (0700) when missing and refuses one that already
// holds a file the flow writes: a key or secret is never overwritten, and
// that is known before an App is created on GitHub.
func prepareAppDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making --out %s: %w", dir, err)
	}
	for _, f := range []string{appKeyFile, appSecretFile, appSnippetFile} {
		p := filepath.Join(dir, f)
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s already exists: opsbot does not overwrite an App's key, secret or configuration; "+
				"pass another --out, or move the old files away first", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checking --out: %w", err)
		}
	}
	return nil
}

type appCallback struct {
	code  string
	reply chan appResult
}

type appResult struct {
	app *createdApp
	err error
}

// createdApp is what the conversion handed over and where it was kept.
type createdApp struct {
	ID                   int64
	Slug, Owner, HTMLURL string
	Key, Secret, Snippet string // file paths
	ClientSecretNotKept  bool
}

var appPage = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Create the GitHub App {{.Name}}</title></head>
<body>
<h1>Create the GitHub App {{.Name}}</h1>
<p>This sends opsbot's App manifest to GitHub ({{.Where}}): the webhook {{.Hook}}, and only the permissions and events opsbot
uses. GitHub shows the App; confirm it there. GitHub then sends you back to this page's server, which keeps the App's
private key and webhook secret in {{.Out}}.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Create the GitHub App on GitHub</button>
</form>
<details><summary>The manifest</summary><pre>{{.Pretty}}</pre></details>
</body></html>
`))

var appDonePage = template.Must(template.New("done").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

// handler serves the page with the form, and the redirect GitHub sends the
// browser to. It answers only requests addressed to the loopback address
// it listens on (a page elsewhere cannot reach it through a DNS name), and
// takes a code only with the state this run made.
func (a *appCreate) handler(host string, codes chan<- appCallback, stop <-chan struct{}, e *env) http.Handler {
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, code int, title, text string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		appDonePage.Execute(w, map[string]string{"Title": title, "Text": text})
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("t")), []byte(a.token)) != 1 {
			page(w, http.StatusForbidden, "Open the URL opsbot printed", "This page is served only at the URL opsbot printed in the "+
				"terminal (with its ?t=…).")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: appSessionCookie, Value: a.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		m, _ := json.Marshal(a.manifest)
		pretty, _ := json.MarshalIndent(a.manifest, "", "  ")
		where := "your account"
		if a.org != "" {
			where = "the organization " + a.org
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		appPage.Execute(w, map[string]any{"Name": a.name, "Where": where, "Hook": a.root + "/webhook", "Out": a.out,
			"Action": template.URL(a.action), "Manifest": string(m), "Pretty": string(pretty)})
	})
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(appSessionCookie); err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.session)) != 1 {
			fmt.Fprintln(e.stderr, "opsbot github app-create: refused a redirect from a browser that did not open the page opsbot printed; still waiting")
			page(w, http.StatusForbidden, "Refused", "This browser did not open the page opsbot printed, so the redirect was not "+
				"used. Open the URL opsbot printed in the terminal and create the App from there.")
			return
		}
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(a.state)) != 1 {
			fmt.Fprintln(e.stderr, "opsbot github app-create: refused a redirect whose state is not this run's (missing or wrong); still waiting")
			page(w, http.StatusBadRequest, "Refused", "This redirect does not carry the state opsbot sent to GitHub, so its code "+
				"was not used. Open the page opsbot printed and create the App from there.")
			return
		}
		code := q.Get("code")
		if !manifestKey.MatchString(code) {
			page(w, http.StatusBadRequest, "Refused", "GitHub's redirect carries no code.")
			return
		}
		cb := appCallback{code: code, reply: make(chan appResult, 1)}
		select {
		case codes <- cb:
		case <-stop:
			page(w, http.StatusGone, "Finished", "opsbot no longer waits for GitHub: see the terminal.")
			return
		case <-r.Context().Done():
			return
		}
		res := <-cb.reply
		if res.err != nil {
			page(w, http.StatusBadGateway, "Not created", res.err.Error())
			return
		}
		page(w, http.StatusOK, "Created", fmt.Sprintf("The GitHub App %s (id %d) is created and its key and webhook secret are kept "+
			"in %s. Close this tab: the terminal says what to do next.", res.app.Slug, res.app.ID, a.out))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != host {
			http.Error(w, "opsbot app-create answers only "+host, http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		mux.ServeHTTP(w, r)
	})
}

// finish exchanges GitHub's code for the App's credentials and writes them.
func (a *appCreate) finish(ctx context.Context, code string) (*createdApp, error) {
	// GitHub takes a code once: an exchange whose answer was lost (the
	// network, GitHub's 5xx) is tried again, and one GitHub never answered
	// can still be finished by hand (explain).
	tries, lost := 0, false
	cfg, err := backoff.Retry(ctx, func() (*github.AppConfig, error) {
		tries++
		cfg, resp, err := a.api.Apps.CompleteAppManifest(ctx, code)
		var ue *url.Error
		switch {
		case err == nil:
			return cfg, nil
		case errors.As(err, &ue), resp != nil && resp.StatusCode >= 500:
			lost = true
			return nil, err
		}
		return nil, backoff.Permanent(err)
	}, backoff.WithBackOff(a.retry()), backoff.WithMaxTries(exchangeTries))
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil {
			switch er.Response.StatusCode {
			case http.StatusUnprocessableEntity:
				if nameTaken(er) {
					return nil, fmt.Errorf("%w: GitHub refused the name %q (an App's name is unique across GitHub); "+
						"nothing was written: run this again with another --name", errAppNameTaken, a.name)
				}
				return nil, fmt.Errorf("GitHub refused to create the App: %s; nothing was written", errorText(er))
			case http.StatusNotFound:
				if lost {
					return nil, fmt.Errorf("GitHub does not know the code any more after an exchange whose answer was lost (%d tries): it "+
						"may have made the App's key then. Nothing was written: in the App's settings (%s), generate a private key and "+
						"save it as %s, and set a webhook secret and save it as %s; or delete the App and run this again",
						tries, a.appsPage(), filepath.Join(a.out, appKeyFile), filepath.Join(a.out, appSecretFile))
				}
				return nil, fmt.Errorf("GitHub does not know the code it sent back (a code works once, within an hour): nothing was written; " +
					"if the App was created, delete it in its settings and run this again")
			}
		}
		// The error's URL holds the code, which buys the App's key: never shown.
		why := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			why = ue.Op + ": " + ue.Err.Error()
		} else if errors.As(err, &er) && er.Response != nil {
			why = fmt.Sprintf("GitHub answered %d: %s", er.Response.StatusCode, errorText(er))
		}
		err = fmt.Errorf("exchanging GitHub's code at %sapp-manifests/…/conversions (%d tries): %s; nothing was written", a.apiURL, tries, why)
		if lost {
			err = &exchangeFailed{err}
		}
		return nil, err
	}
	// The name may have been changed on GitHub's page (one taken, say); the
	// owner asked for may not.
	if a.org != "" && !strings.EqualFold(cfg.GetOwner().GetLogin(), a.org) {
		return nil, fmt.Errorf("GitHub's code is for the App %q owned by %q, not by %q as this run asked: nothing was written; "+
			"if you did not create that App, someone else completed this flow: run it again", cfg.GetName(), cfg.GetOwner().GetLogin(), a.org)
	}
	if cfg.GetID() <= 0 || cfg.GetPEM() == "" || cfg.GetWebhookSecret() == "" {
		return nil, fmt.Errorf("GitHub's answer lacks the App's id, private key or webhook secret: nothing was written; " +
			"delete the App in its settings and run this again")
	}
	if err := checkPrivateKey(cfg.GetPEM()); err != nil {
		return nil, fmt.Errorf("the private key GitHub handed over does not load (%w): nothing was written; generate a key in "+
			"the App's settings (%s)", err, cfg.GetHTMLURL())
	}
	res := &createdApp{ID: cfg.GetID(), Slug: cfg.GetSlug(), Owner: cfg.GetOwner().GetLogin(), HTMLURL: cfg.GetHTMLURL(),
		Key: filepath.Join(a.out, appKeyFile), Secret: filepath.Join(a.out, appSecretFile), Snippet: filepath.Join(a.out, appSnippetFile),
		ClientSecretNotKept: cfg.GetClientSecret() != ""}
	if err := writeNewFile(res.Key, []byte(cfg.GetPEM()), 0o600); err != nil {
		return nil, fmt.Errorf("%w: the key is lost; generate another in the App's settings (%s)", err, res.HTMLURL)
	}
	if err := writeNewFile(res.Secret, []byte(cfg.GetWebhookSecret()+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("%w: set a new webhook secret in the App's settings (%s) and keep it in %s", err, res.HTMLURL, res.Secret)
	}
	if err := writeNewFile(res.Snippet, []byte(a.snippet(res)), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// exchangeTries is how many times GitHub's code is offered for the App's
// key before the run gives up and says how to finish by hand.
const exchangeTries = 5

// retry is the back-off between two tries of the exchange: about three
// seconds in all, since the code's hour is the browser's too.
func (a *appCreate) retry() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 2*time.Second
	return b
}

// exchangeFailed is an exchange of GitHub's code that never got GitHub's
// answer: the code may still be good, and the run can be finished by hand.
type exchangeFailed struct{ err error }

func (e *exchangeFailed) Error() string { return e.err.Error() }
func (e *exchangeFailed) Unwrap() error { return e.err }

// explain is err as the terminal says it: for an exchange that never got
// GitHub's answer, with how to finish the run by hand with its code (which
// buys the App's key: said on the terminal only, never on the page).
func (a *appCreate) explain(e *env, code string, err error) error {
	var ef *exchangeFailed
	if !errors.As(err, &ef) {
		return err
	}
	cmd := fmt.Sprintf("opsbot github app-create --url %s --out %s --code %s --api-url %s", a.root, a.out, code, a.apiURL)
	if a.org != "" {
		cmd += " --org " + a.org
	} else {
		cmd += " --name " + a.name
	}
	fmt.Fprintf(e.stderr, "GitHub's code is good for an hour from when GitHub sent the browser back, and once: finish by hand with\n  %s\n"+
		"(If that says GitHub does not know the code, the App was made with a key that is not here: generate one in its settings, %s.)\n",
		cmd, a.appsPage())
	return err
}

// appsPage is GitHub's page of the Apps the run's owner has.
func (a *appCreate) appsPage() string {
	if a.org != "" {
		return a.web + "organizations/" + url.PathEscape(a.org) + "/settings/apps"
	}
	return a.web + "settings/apps"
}

func nameTaken(er *github.ErrorResponse) bool {
	if strings.Contains(strings.ToLower(er.Message), "already in use") {
		return true
	}
	for _, x := range er.Errors {
		if strings.Contains(strings.ToLower(x.Message), "already in use") || (x.Field == "name" && x.Code == "already_exists") {
			return true
		}
	}
	return false
}

func errorText(er *github.ErrorResponse) string {
	parts := []string{er.Message}
	for _, x := range er.Errors {
		if x.Message != "" {
			parts = append(parts, x.Message)
		} else {
			parts = append(parts, x.Field+" "+x.Code)
		}
	}
	return strings.Join(parts, ": ")
}

// checkPrivateKey checks that pemText is an RSA private key opsbot can sign
// its App's tokens with.
func checkPrivateKey(pemText string) error {
	b, _ := pem.Decode([]byte(pemText))
	if b == nil {
		return errors.New("not PEM")
	}
	if _, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return nil
	}
	if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
		return fmt.Errorf("not an RSA private key: %w", err)
	}
	return nil
}

// writeNewFile writes a file that must not exist yet, with mode perm, and
// syncs it.
func writeNewFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// snippet is the github: section of opsbot's configuration for the App.
func (a *appCreate) snippet(res *createdApp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The GitHub App %s (id %d, %s), created by `opsbot github app-create`.\n", res.Slug, res.ID, res.HTMLURL)
	fmt.Fprintf(&b, "# Merge this github: section into opsbot's configuration (github.app replaces github.token_env),\n")
	fmt.Fprintf(&b, "# start opsbot with OPSBOT_WEBHOOK_SECRET_FILE=%s, and check it with opsbot config check.\n", res.Secret)
	fmt.Fprintf(&b, "github:\n")
	if a.apiURL != "https://api.github.com/" {
		fmt.Fprintf(&b, "  api_url: %s\n  web_url: %s\n", yamlString(a.apiURL), yamlString(a.web))
	}
	fmt.Fprintf(&b, "  app:\n    id: %d\n    private_key_file: %s\n", res.ID, yamlString(res.Key))
	fmt.Fprintf(&b, "    # installation_id: unset, each webhook names its installation\n")
	fmt.Fprintf(&b, "  webhook_secret_env: OPSBOT_WEBHOOK_SECRET\n")
	return b.String()
}

// yamlString quotes s for YAML (JSON's quoting is YAML's).
func yamlString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

func (a *appCreate) printNext(e *env, res *createdApp) {
	w := e.stdout
	fmt.Fprintf(w, "\nCreated the GitHub App %s (id %d), owned by %s: %s\n", res.Slug, res.ID, res.Owner, res.HTMLURL)
	width := max(len(res.Key), len(res.Secret), len(res.Snippet))
	fmt.Fprintf(w, "Wrote:\n  %-*s  the App's private key (0600)\n  %-*s  the webhook secret (0600)\n  %-*s  the github: section of the configuration\n",
		width, res.Key, width, res.Secret, width, res.Snippet)
	fmt.Fprintf(w, "Next:\n")
	fmt.Fprintf(w, "  1. Install the App on the benchmark repository (and on the staging repository when /stage-results is used): %s/installations/new\n",
		res.HTMLURL)
	fmt.Fprintf(w, "  2. Merge %s into opsbot's configuration: github.app.id and github.app.private_key_file (it replaces github.token_env).\n", res.Snippet)
	fmt.Fprintf(w, "  3. Start opsbot with OPSBOT_WEBHOOK_SECRET_FILE=%s (or OPSBOT_WEBHOOK_SECRET set to its content): the App's webhook\n"+
		"     already sends %s/webhook the events opsbot uses, signed with it; no other webhook is needed.\n", res.Secret, a.root)
	fmt.Fprintf(w, "  4. Check it: opsbot config check --config FILE\n")
	if res.ClientSecretNotKept {
		fmt.Fprintf(w, "GitHub also handed over the App's client secret; opsbot does not use it, so it was not kept.\n")
	}
}
