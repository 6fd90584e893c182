package aftermerge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

// StepDownstream is a watch whose main run succeeded, following the
// results repository's ingest run (after_merge.downstream).
const StepDownstream = "downstream"

// DownstreamWait is how long after the main run succeeded the watch looks
// for the results repository's ingest run before it says none came.
const DownstreamWait = 30 * time.Minute

// DownstreamSettings is after_merge.downstream: the results repository
// whose ingest run the main run's dispatch starts, and its workflow. The
// run is bound by its run-name, which that workflow sets to carry both run
// ids ("Ingest source <source-run-id> merge <merge-run-id>").
type DownstreamSettings struct {
	Repo     string `yaml:"repo"`
	Workflow string `yaml:"workflow"`
}

// Downstream is what the watch read of the ingest run downstream.
type Downstream struct {
	Repo       string    `json:"repo"`
	Since      time.Time `json:"since"` // when the main run succeeded, as read
	WorkflowID int64     `json:"workflow_id,omitempty"`
	RunID      int64     `json:"run_id,omitempty"`
	RunURL     string    `json:"run_url,omitempty"`
	Source     int64     `json:"source,omitempty"` // the source run its run-name names
}

// runName reads a downstream run's run-name: the source and merge run ids
// it was dispatched with (ok false: not a name of that shape).
var runName = regexp.MustCompile(`(?i)\bsource[\s:=#-]*(\d{1,19})\b.*\bmerge[\s:=#-]*(\d{1,19})\b`)

func parseRunName(title string) (source, merge int64, ok bool) {
	m := runName.FindStringSubmatch(title)
	if m == nil {
		return 0, 0, false
	}
	s, err1 := strconv.ParseInt(m[1], 10, 64)
	g, err2 := strconv.ParseInt(m[2], 10, 64)
	return s, g, err1 == nil && err2 == nil
}

// succeededThen ends a watch whose main run succeeded, or, with a results
// repository configured and the ingest job run, follows its ingest run
// from when the main run ended (at).
func (h *Handler) succeededThen(s seq.Step[Data], data Data, said string, ingestRan bool, at time.Time, sets Settings) (string, plan.Plan, error) {
	if sets.Downstream.Repo == "" || !ingestRan {
		if ingestRan {
			said += ". The dispatch to the ingest is the last thing opsbot can see: it does not see the ingest's inputs " +
				"(`after_merge.downstream` follows the results repository's ingest run)"
		} else {
			said += " (opsbot does not see the ingest's inputs)"
		}
		return h.end(s, data, StepSucceeded, said, "")
	}
	if at.IsZero() || at.After(s.Now) {
		at = s.Now
	}
	data.Trail = append(data.Trail, said)
	data.Downstream = &Downstream{Repo: sets.Downstream.Repo, Since: at}
	return h.wait(s, data, StepDownstream, fmt.Sprintf("⏳ looking for the ingest run in %s named for merge run %d",
		mdtext.Code(sets.Downstream.Repo), data.RunID), "after-merge-downstream", Poll)
}

// dispatchEvents are the events of a run the main run's dispatch starts:
// a run of a push or a pull request (whose name a branch's pusher or a
// fork's author sets) is never taken for it.
var dispatchEvents = map[string]bool{"repository_dispatch": true, "workflow_dispatch": true}

// downstream follows the results repository's ingest run of the main run:
// found by its run-name (merge run id the main run's), a dispatched run
// created since an hour before the main run ended, then followed by its
// id to its end; its source run is held to the one opsbot's audit says
// authorized the merged head. Two runs named for the merge are said, and
// neither is taken.
func (h *Handler) downstream(ctx context.Context, gh *ghclient.Client, s seq.Step[Data], sets Settings) (string, plan.Plan, error) {
	data := s.Data
	ds := *data.Downstream
	data.Downstream = &ds
	repo := ds.Repo
	unseen := func(err error) (string, plan.Plan, error) {
		return h.end(s, data, StepSucceeded, fmt.Sprintf("⚠️ opsbot cannot read the runs of %s in %s (%s): the installation of this "+
			"repository must cover it, with Actions read, or `after_merge.downstream` be fixed. The dispatch to the ingest is the last "+
			"thing opsbot saw", mdtext.Code(sets.Downstream.Workflow), mdtext.Code(repo), mdtext.Text(err.Error())), "")
	}
	var run *github.WorkflowRun
	if ds.RunID != 0 {
		r, err := gh.Run(ctx, repo, ds.RunID)
		if err != nil {
			if cannotSee(err) {
				return unseen(err)
			}
			return "", plan.Plan{}, err
		}
		run = r
	} else {
		if ds.WorkflowID == 0 {
			id, err := gh.WorkflowID(ctx, repo, sets.Downstream.Workflow)
			if err != nil {
				if cannotSee(err) {
					return unseen(err)
				}
				return "", plan.Plan{}, err
			}
			ds.WorkflowID = id
		}
		list, err := gh.RunsSince(ctx, repo, ds.WorkflowID, ds.Since.Add(-time.Hour), 100)
		if err != nil {
			if cannotSee(err) {
				return unseen(err)
			}
			return "", plan.Plan{}, err
		}
		var named []*github.WorkflowRun
		for _, r := range list {
			if src, merge, ok := parseRunName(r.GetDisplayTitle()); ok && merge == data.RunID && dispatchEvents[r.GetEvent()] {
				named, ds.Source = append(named, r), src
			}
		}
		if len(named) > 1 {
			var links []string
			for _, r := range named {
				links = append(links, commands.RunLink(r.GetID(), r.GetHTMLURL()))
			}
			return h.end(s, data, StepSucceeded, fmt.Sprintf("⚠️ %d runs of %s are named for merge run %d (%s): opsbot cannot tell which "+
				"took the results, and says nothing of them; check which results were published", len(named), mdtext.Code(repo), data.RunID,
				strings.Join(links, ", ")), "")
		}
		if len(named) == 0 {
			if s.Now.Sub(ds.Since) >= DownstreamWait {
				return h.end(s, data, StepSucceeded, fmt.Sprintf("⚠️ no dispatched ingest run of %s named for merge run %d came within %s "+
					"of the run's success (its run-name must carry both ids: `Ingest source <source-run-id> merge <merge-run-id>`): the "+
					"dispatch to the ingest is the last thing opsbot saw", mdtext.Code(repo), data.RunID, commands.Span(DownstreamWait)), "")
			}
			return h.wait(s, data, StepDownstream, data.Now, "after-merge-downstream-waiting", Poll)
		}
		run = named[0]
		ds.RunID, ds.RunURL = run.GetID(), run.GetHTMLURL()
	}
	link := commands.RunLink(ds.RunID, ds.RunURL)
	if run.GetStatus() != "completed" {
		return h.wait(s, data, StepDownstream, fmt.Sprintf("⏳ the ingest run %s of %s is %s", link, mdtext.Code(repo),
			mdtext.Text(strings.ReplaceAll(run.GetStatus(), "_", " "))), "after-merge-downstream-running", Poll)
	}
	pair := fmt.Sprintf("source run %d and merge run %d", ds.Source, data.RunID)
	said := fmt.Sprintf("📥 the ingest run %s of %s, dispatched with %s, ", link, mdtext.Code(repo), pair)
	step, conclusion := StepSucceeded, ""
	if run.GetConclusion() == "success" {
		said += "succeeded"
	} else {
		step, conclusion = StepIngestFailed, run.GetConclusion()
		said += "ended " + mdtext.Code(mdtext.Text(run.GetConclusion())) + ": the results may not have reached the database; see its logs"
	}
	return h.end(s, data, step, said+mismatch(data, ds), conclusion)
}

// cannotSee reports whether err is GitHub saying opsbot may not read the
// results repository's runs (not found, or forbidden): asking again does
// not change it.
func cannotSee(err error) bool {
	var er *github.ErrorResponse
	return errors.Is(err, ghclient.ErrNotFound) || (errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden &&
		!strings.Contains(strings.ToLower(er.Message), "rate limit"))
}

// mismatch says whether the ingest's source run is the one opsbot's
// audit says authorized the merged head, or, where opsbot reused nothing
// (or the PR's labels allowed no reuse), the merge run itself ("": it is).
func mismatch(data Data, ds Downstream) string {
	if data.Source != 0 && data.NoReuse == "" {
		if ds.Source == data.Source {
			return fmt.Sprintf(". Its source run is the one opsbot's audit says authorized the merged head (run %d, by %s)", data.Source,
				mdtext.Mention(data.SourceBy))
		}
		return fmt.Sprintf(". ⚠️ Its source run %d is not run %d, which opsbot's audit says authorized the merged head %s (by %s): "+
			"check which results were published", ds.Source, data.Source, mdtext.Code(mdtext.ShortSHA(data.Head)), mdtext.Mention(data.SourceBy))
	}
	if ds.Source == data.RunID {
		return ""
	}
	return fmt.Sprintf(". ⚠️ Its source run %d is not the merge run: opsbot's gate gave this merge no source run (the merge run "+
		"swept the merged head %s itself); check which results were published", ds.Source, mdtext.Code(mdtext.ShortSHA(data.Head)))
}
