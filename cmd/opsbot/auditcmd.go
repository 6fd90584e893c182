package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/server"
	"github.com/SemiAnalysisAI/opsbot/state"
)

func runAudit(e *env, args []string) error {
	fs := newFlags(e, "audit", "(--server URL | --db PATH) [filters] [--format table|json|csv]",
		"opsbot audit --db opsbot.db --repo SemiAnalysisAI/InferenceX --pr 2512",
		"opsbot audit --server https://opsbot.example.com --sha 8d034aa --format json",
		"opsbot audit --db opsbot.db --dead-letters",
		"opsbot audit --server https://opsbot.example.com --saved --since 720h")
	serverURL := fs.String("server", "", "read through a running server's API (token from OPSBOT_API_TOKEN)")
	db := fs.String("db", "", "read a database file no server holds")
	repo := fs.String("repo", "", "OWNER/REPO")
	pr := fs.Int("pr", 0, "PR number (with --repo)")
	sha := fs.String("sha", "", "head commit: its SHA, or its first 7 or more hex characters (as the table shows it)")
	run := fs.Int64("run", 0, "run id")
	kind := fs.String("kind", "", "only records of this kind: "+strings.Join(state.AuditKinds, ", "))
	since := fs.String("since", "", "only records at or after this time (RFC 3339, or a duration such as 24h)")
	format := fs.String("format", "table", "table, json or csv")
	limit := fs.Int("limit", 0, "at most this many records (0: all)")
	dead := fs.Bool("dead-letters", false, "list the deliveries that could not be processed instead")
	failed := fs.Bool("failed-notices", false, "list the notices GitHub refused for good instead")
	saved := fs.Bool("saved", false, "list what the skips saved instead: skips, runner and GPU hours, by repository and ISO week (--repo, --since filter)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*serverURL == "") == (*db == "") {
		fmt.Fprintln(e.stderr, "opsbot audit: give exactly one of --server URL or --db PATH")
		return exitCode(2)
	}
	if *format != "table" && *format != "json" && *format != "csv" {
		fmt.Fprintf(e.stderr, "opsbot audit: --format %q: use table, json or csv\n", *format)
		return exitCode(2)
	}
	if *kind != "" && !slices.Contains(state.AuditKinds, *kind) {
		fmt.Fprintf(e.stderr, "opsbot audit: --kind %q is not a kind of record: use one of %s\n", *kind, strings.Join(state.AuditKinds, ", "))
		return exitCode(2)
	}
	if *saved && (*pr > 0 || *sha != "" || *run != 0 || *kind != "" || *dead || *failed) {
		fmt.Fprintln(e.stderr, "opsbot audit: --saved lists totals by repository and week: it takes --repo and --since only")
		return exitCode(2)
	}
	if *pr > 0 && *repo == "" {
		fmt.Fprintln(e.stderr, "opsbot audit: --pr needs --repo")
		return exitCode(2)
	}
	q := url.Values{}
	set := func(k, v string) {
		if v != "" && v != "0" {
			q.Set(k, v)
		}
	}
	set("repo", *repo)
	set("pr", strconv.Itoa(*pr))
	set("sha", *sha)
	set("run", strconv.FormatInt(*run, 10))
	set("kind", *kind)
	if *since != "" {
		t, err := parseSince(*since)
		if err != nil {
			fmt.Fprintf(e.stderr, "opsbot audit: --since %q: %v\n", *since, err)
			return exitCode(2)
		}
		set("since", t.Format(time.RFC3339))
	}
	if _, err := server.ParseAuditQuery(q); err != nil {
		fmt.Fprintf(e.stderr, "opsbot audit: %v\n", err)
		return exitCode(2)
	}
	src, err := openAuditSource(e, *serverURL, *db)
	if err != nil {
		return err
	}
	defer src.close()
	if *failed {
		ns, err := src.failedNotices()
		if err != nil {
			return err
		}
		return printFailedNotices(e.stdout, ns, *format)
	}
	if *saved {
		var from time.Time
		if *since != "" {
			from, _ = parseSince(*since) // checked above
		}
		ws, err := src.saved(*repo, from)
		if err != nil {
			return err
		}
		return printSaved(e.stdout, ws, *format)
	}
	if *dead {
		dl, err := src.deadLetters()
		if err != nil {
			return err
		}
		return printDeadLetters(e.stdout, dl, *format)
	}
	var all []state.AuditRecord
	after := uint64(0)
	for {
		if after > 0 {
			q.Set("after", strconv.FormatUint(after, 10))
		}
		q.Set("limit", "1000")
		page, err := src.page(q)
		if err != nil {
			return err
		}
		all = append(all, page.Records...)
		if page.Next == 0 || (*limit > 0 && len(all) >= *limit) {
			break
		}
		after = page.Next
	}
	if *limit > 0 && len(all) > *limit {
		all = all[:*limit]
	}
	return printAudit(e.stdout, all, *format)
}

func parseSince(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Parse(time.RFC3339, s)
}

type auditSource struct {
	page          func(q url.Values) (server.AuditPage, error)
	deadLetters   func() ([]state.DeadLetter, error)
	failedNotices func() ([]state.Notice, error)
	saved         func(repo string, since time.Time) ([]state.SavedWeek, error)
	close         func()
}

func openAuditSource(e *env, serverURL, db string) (*auditSource, error) {
	if db != "" {
		st, err := openForReading(db, "use --server URL instead")
		if err != nil {
			return nil, err
		}
		return &auditSource{
			page: func(q url.Values) (server.AuditPage, error) {
				aq, err := server.ParseAuditQuery(q)
				if err != nil {
					return server.AuditPage{}, err
				}
				recs, next, err := st.Audit(aq)
				if err == nil && len(recs) == 0 && aq.Repo != "" && aq.After == 0 {
					// A typo in --repo looks like an empty audit: say when the
					// database holds nothing of the repository at all (which
					// the database alone cannot tell from a repository served
					// but quiet so far: said, not refused).
					if some, _, err := st.Audit(state.AuditQuery{Repo: aq.Repo, Limit: 1}); err == nil && len(some) == 0 {
						fmt.Fprintf(e.stderr, "opsbot audit: the database holds nothing of %s: check the name (OWNER/REPO, as in repos[].name), "+
							"unless opsbot has had no event of it yet\n", aq.Repo)
					}
				}
				return server.AuditPage{Records: recs, Next: next}, err
			},
			deadLetters:   st.DeadLetters,
			failedNotices: st.FailedNotices,
			saved:         st.Saved,
			close:         func() { st.Close() },
		}, nil
	}
	token, err := e.apiToken()
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, errNoToken
	}
	get := func(path string, q url.Values, v any) error {
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		return getJSON(ctx, serverURL, token, http.MethodGet, path, nil, v)
	}
	return &auditSource{
		page: func(q url.Values) (server.AuditPage, error) {
			var p server.AuditPage
			return p, get("/api/v1/audit", q, &p)
		},
		deadLetters: func() ([]state.DeadLetter, error) {
			var dl []state.DeadLetter
			return dl, get("/api/v1/dead-letters", nil, &dl)
		},
		failedNotices: func() ([]state.Notice, error) {
			var ns []state.Notice
			return ns, get("/api/v1/failed-notices", nil, &ns)
		},
		saved: func(repo string, since time.Time) ([]state.SavedWeek, error) {
			q := url.Values{}
			if repo != "" {
				q.Set("repo", repo)
			}
			if !since.IsZero() {
				q.Set("since", since.UTC().Format(time.RFC3339))
			}
			var ws []state.SavedWeek
			return ws, get("/api/v1/saved", q, &ws)
		},
		close: func() {},
	}, nil
}

var auditColumns = []string{"seq", "time", "kind", "outcome", "command", "repo", "pr", "head_sha", "run_id", "pin_id",
	"actor_login", "actor_id", "role", "comment_url", "delivery_id", "reason", "jobs", "jobs_succeeded", "runner_seconds", "gpu_seconds"}

func auditRow(r state.AuditRecord) []string {
	num := func(v int64) string {
		if v == 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	return []string{strconv.FormatUint(r.Seq, 10), r.Time.UTC().Format(time.RFC3339), string(r.Kind), r.Outcome, r.Command, r.Repo,
		num(int64(r.PR)), r.HeadSHA, num(r.RunID), num(int64(r.PinID)), r.ActorLogin, num(r.ActorID), r.Role, r.CommentURL,
		r.DeliveryID, r.Reason, num(int64(r.Jobs)), num(int64(r.JobsSucceeded)), num(r.RunnerSeconds), num(r.GPUSeconds)}
}

// printSaved prints what the skips saved, by repository and week.
func printSaved(w io.Writer, ws []state.SavedWeek, format string) error {
	switch format {
	case "json":
		if ws == nil {
			ws = []state.SavedWeek{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ws)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"repo", "week", "skips", "runner_seconds", "gpu_seconds"})
		for _, x := range ws {
			cw.Write([]string{x.Repo, x.Week, strconv.Itoa(x.Skips), strconv.FormatInt(x.RunnerSeconds, 10), strconv.FormatInt(x.GPUSeconds, 10)})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "REPO\tWEEK\tSKIPS\tRUNNER HOURS SAVED\tGPU HOURS SAVED")
	var skips int
	var runner, gpu int64
	for _, x := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", x.Repo, x.Week, x.Skips, runs.Hours(x.RunnerSeconds), runs.Hours(x.GPUSeconds))
		skips, runner, gpu = skips+x.Skips, runner+x.RunnerSeconds, gpu+x.GPUSeconds
	}
	if len(ws) > 1 {
		fmt.Fprintf(tw, "total\t\t%d\t%s\t%s\n", skips, runs.Hours(runner), runs.Hours(gpu))
	}
	return tw.Flush()
}

func printAudit(w io.Writer, recs []state.AuditRecord, format string) error {
	switch format {
	case "json":
		if recs == nil {
			recs = []state.AuditRecord{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(recs)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(auditColumns)
		for _, r := range recs {
			cw.Write(auditRow(r))
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tOUTCOME\tPR\tHEAD\tRUN\tWHO\tREASON")
	for _, r := range recs {
		pr := ""
		if r.PR > 0 {
			pr = fmt.Sprintf("%s#%d", r.Repo, r.PR)
		}
		run := ""
		if r.RunID > 0 {
			run = strconv.FormatInt(r.RunID, 10)
		}
		kind := string(r.Kind)
		if r.Command != "" {
			kind += " " + r.Command
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.UTC().Format("2006-01-02 15:04:05"), kind, r.Outcome, pr,
			shortText(r.HeadSHA, 7), run, r.ActorLogin, shortText(r.Reason, 60))
	}
	return tw.Flush()
}

func printDeadLetters(w io.Writer, dl []state.DeadLetter, format string) error {
	if format == "json" {
		if dl == nil {
			dl = []state.DeadLetter{}
		}
		for i := range dl {
			dl[i].Body = nil
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(dl)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tDELIVERY\tEVENT\tREPO\tPR\tATTEMPTS\tREASON")
	for _, d := range dl {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", d.At.UTC().Format(time.RFC3339), d.Delivery.ID, d.Delivery.Event,
			d.Delivery.Repo, d.Delivery.PR, d.Attempts, shortText(d.Reason, 80))
	}
	return tw.Flush()
}

func shortText(s string, n int) string {
	s = gate.OneLine(s)
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func printFailedNotices(w io.Writer, ns []state.Notice, format string) error {
	if format == "json" {
		if ns == nil {
			ns = []state.Notice{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(ns)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tNOTICE\tKIND\tPR\tATTEMPTS\tREASON")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s#%d\t%d\t%s\n", n.CreatedAt.UTC().Format(time.RFC3339), n.ID, n.Kind, n.Repo, n.PR,
			n.Attempts, shortText(n.LastError, 80))
	}
	return tw.Flush()
}
