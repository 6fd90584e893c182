package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
)

// githubPermission is one permission a GitHub App or a fine-grained token
// needs, and for what; docs/credentials.md has the same table.
type githubPermission struct {
	Name, Level, Why string
}

// appFeatures are the optional features an App is made for: each adds
// what it needs to the permissions.
type appFeatures struct {
	staging, teams, merge, external, rerun bool
}

// githubPermissions are what opsbot's features need of a repository it
// serves. staging, teams and merge add what those features need.
func githubPermissions(f appFeatures) []githubPermission {
	ps := []githubPermission{
		{"metadata", "read", "every App has it"},
		{"actions", "read", "runs, their attempts and artifacts, the sweep workflow's id"},
		{"contents", "read", "compares (protected and allowed paths), the repository's default branch, repository_dispatch webhooks"},
		{"pull_requests", "read", "the PR, its commits and head, the PRs of a merge commit"},
		{"issues", "write", "replies and reactions on PR conversations, reading comments and the PR timeline"},
		{"statuses", "write", "the opsbot/sweep-gate commit status; the statuses on a head a merge waits for"},
		{"checks", "write", "the opsbot/sweep-gate check run on each decided head and its buttons; the check runs a merge waits for"},
		{"merge_queues", "read", "merge_group events: the gate's status on a merge queue's group, and what the queue did for a queued merge"},
	}
	switch {
	case f.merge:
		ps[2] = githubPermission{"contents", "write", "as read, and /merge-with-reuse: updating a PR's branch and merging it (or adding it to the merge queue)" +
			map[bool]string{true: "; sending the staging repository_dispatch (install the App on the staging repository too)"}[f.staging]}
		ps[3] = githubPermission{"pull_requests", "write", "as read, and /merge-with-reuse: updating a PR's branch and merging it"}
	case f.staging:
		ps[2] = githubPermission{"contents", "write", "as read, and sending the staging repository_dispatch (install the App on the staging repository too)"}
	}
	var writes []string
	if f.external {
		writes = append(writes, "/approve-sweep: dispatching the external PRs' workflow and cancelling a revoked approval's run")
	}
	if f.rerun {
		writes = append(writes, "/rerun-failed and /recover-ingest: re-running the failed jobs of the default branch's run after a merge, dispatching the recovery workflow")
	}
	if len(writes) > 0 {
		ps[1] = githubPermission{"actions", "write", "as read, and " + strings.Join(writes, "; ")}
	}
	if f.merge {
		ps[len(ps)-1] = githubPermission{"merge_queues", "write", "as read, and /merge-with-reuse: adding a PR to the default branch's merge queue and taking it out"}
		// GitHub refuses a push that changes .github/workflows/** to an App
		// without it: the update of a branch that brings main's workflow
		// changes is such a push.
		ps = append(ps, githubPermission{"workflows", "write", "/merge-with-reuse: updating a PR's branch when the update brings the default branch's changes to .github/workflows/**"})
	}
	if f.teams {
		ps = append(ps, githubPermission{"members", "read", "allow_teams: team membership (an organization permission)"})
	}
	return ps
}

// githubEvents are the webhook events opsbot uses.
var githubEvents = app.UsedEvents()

// githubUsage is `opsbot github`'s synopsis: its three subcommands.
const githubUsage = `Usage: opsbot github app-create --url URL [--org ORG] [--out DIR] [--name NAME] [--staging] [--teams] [--merge] [--external] [--rerun]
                            [--github-url URL] [--api-url URL] [--port N] [--timeout D] [--code CODE]
       opsbot github app-manifest --url URL [--name NAME] [--staging] [--teams] [--merge] [--external] [--rerun]
       opsbot github events

  app-create    create opsbot's GitHub App through GitHub's manifest flow, and keep its key and webhook secret
  app-manifest  print the App manifest (exactly the permissions and events opsbot needs), to create the App by hand
  events        print the webhook events opsbot uses: each one's name in GitHub's webhook settings, and why

Examples:
  opsbot github app-create --url https://opsbot.example.com --org SemiAnalysisAI --out /etc/opsbot/github
  opsbot github app-manifest --url https://opsbot.example.com --staging --teams > manifest.json

Run 'opsbot github app-create --help' or 'opsbot github app-manifest --help' for the flags.`

func runGitHub(e *env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "app-manifest":
			return runAppManifest(e, args[1:])
		case "app-create":
			return runAppCreate(e, args[1:])
		case "events":
			return runEvents(e, args[1:])
		case "--help", "-h", "-help":
			fmt.Fprintln(e.stdout, githubUsage)
			return nil
		}
	}
	unknownSubcommand(e, "github", args, "app-create", "app-manifest", "events")
	fmt.Fprintln(e.stderr, githubUsage)
	return exitCode(2)
}

// unknownSubcommand says, before a command's usage, which subcommand it
// was given that it does not have (nothing when it was given none), and
// the one meant when the word is a letter or two off.
func unknownSubcommand(e *env, cmd string, args []string, subs ...string) {
	if len(args) == 0 {
		fmt.Fprintf(e.stderr, "opsbot %s: which one? (%s)\n", cmd, strings.Join(subs, ", "))
		return
	}
	got := args[0]
	msg := fmt.Sprintf("opsbot %s: unknown subcommand %q", cmd, got)
	if s := config.Closest(got, subs); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	fmt.Fprintln(e.stderr, msg)
}

// appManifest is the GitHub App manifest of an opsbot served at root (its
// public https base URL, no trailing slash): the webhook goes to
// root/webhook, with exactly the permissions and events opsbot uses.
func appManifest(root, name string, f appFeatures) map[string]any {
	perms := map[string]string{}
	for _, p := range githubPermissions(f) {
		perms[p.Name] = p.Level
	}
	return map[string]any{
		"name": name, "url": root, "public": false,
		"description":         "opsbot: chat-ops for a benchmark repository's pull requests (pins, the sweep gate, staging).",
		"hook_attributes":     map[string]any{"url": root + "/webhook", "active": true},
		"default_permissions": perms,
		"default_events":      githubEvents,
	}
}

// publicBase checks opsbot's public base URL (https, a host) and returns it
// without a trailing slash.
func publicBase(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	// The base, not the webhook's URL: opsbot adds /webhook itself.
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(raw, "/"), "/webhook"), "/"), true
}

func runAppManifest(e *env, args []string) error {
	fs := newFlags(e, "github app-manifest", "--url URL [--name NAME] [--staging] [--teams] [--merge] [--external] [--rerun]",
		"opsbot github app-manifest --url https://opsbot.example.com",
		"opsbot github app-manifest --url https://opsbot.example.com --staging --teams > manifest.json")
	base := fs.String("url", "", "opsbot's public base URL (the webhook goes to URL/webhook)")
	name := fs.String("name", "opsbot", "the App's name")
	staging := fs.Bool("staging", false, "also contents: write, for /stage-results dispatches")
	teams := fs.Bool("teams", false, "also members: read, for allow_teams")
	merge := fs.Bool("merge", false, "also contents: write, pull_requests: write, workflows: write and merge_queues: write, for "+
		"/merge-with-reuse (docs/commands.md#merging-with-reuse)")
	external := fs.Bool("external", false, "also actions: write, for /approve-sweep (dispatching the external PRs' workflow)")
	rerun := fs.Bool("rerun", false, "also actions: write, for /rerun-failed and /recover-ingest (re-running a merge's run, dispatching the recovery)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	root, ok := publicBase(*base)
	if !ok {
		fmt.Fprintln(e.stderr, "opsbot github app-manifest: --url must be opsbot's public https:// base URL, such as https://opsbot.example.com")
		return exitCode(2)
	}
	out, err := json.MarshalIndent(appManifest(root, *name, appFeatures{staging: *staging, teams: *teams, merge: *merge, external: *external, rerun: *rerun}), "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, string(out))
	return nil
}

func runSlack(e *env, args []string) error {
	if len(args) == 0 || args[0] != "app-manifest" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
			args = []string{"app-manifest", "--help"}
		} else {
			unknownSubcommand(e, "slack", args, "app-manifest")
			fmt.Fprintln(e.stderr, "Usage: opsbot slack app-manifest [--name NAME] [--url URL]")
			return exitCode(2)
		}
	}
	fs := newFlags(e, "slack app-manifest", "[--name NAME] [--url URL]", "opsbot slack app-manifest > slack-manifest.json",
		"opsbot slack app-manifest --url https://opsbot.example.com > slack-manifest.json   # with buttons")
	name := fs.String("name", "opsbot", "the Slack app's name")
	base := fs.String("url", "", "opsbot's public https base URL: clicks on its buttons go to URL/slack/interactions (interactivity)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	settings := map[string]any{"org_deploy_enabled": false, "socket_mode_enabled": false, "token_rotation_enabled": false,
		"is_hosted": false}
	if *base != "" {
		root, ok := publicBase(*base)
		if !ok {
			fmt.Fprintln(e.stderr, "opsbot slack app-manifest: --url must be opsbot's public https:// base URL, such as https://opsbot.example.com")
			return exitCode(2)
		}
		settings["interactivity"] = map[string]any{"is_enabled": true, "request_url": root + "/slack/interactions"}
	}
	manifest := map[string]any{
		"_metadata":           map[string]any{"major_version": 1, "minor_version": 1},
		"display_information": map[string]any{"name": *name, "description": "Mirrors opsbot's notices on benchmark PRs."},
		"features":            map[string]any{"bot_user": map[string]any{"display_name": *name, "always_online": false}},
		"oauth_config":        map[string]any{"scopes": map[string]any{"bot": []string{"chat:write"}}},
		"settings":            settings,
	}
	out, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, string(out))
	return nil
}

// runEvents prints the webhook events opsbot's commands use, as the App
// manifest subscribes to them: a webhook set up by hand takes these.
func runEvents(e *env, args []string) error {
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "opsbot github events takes no arguments (got %q)\n", args[0])
		return exitCode(2)
	}
	evs, err := app.Events()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tIN THE WEBHOOK SETTINGS\tWHAT OPSBOT USES IT FOR")
	for _, ev := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ev.Name, ev.Label, ev.Why)
	}
	return tw.Flush()
}
