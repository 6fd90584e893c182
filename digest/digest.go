// Package digest is the weekly digest of what reuse did in a repository,
// posted in its Slack channel (slack.digest: weekly): skips and who
// authorized them, runner and GPU hours saved, pins that expired unused,
// refusals, merges. It is a sequence of the repository's own (PR 0) on the
// sequence engine: its next send is data, so a restart neither loses nor
// repeats a week, and the send and the next wake-up are one write.
package digest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Kind is the digest's sequence kind.
const Kind = "digest"

// Week is one ISO week's totals of what the skips saved.
type Week struct {
	Skips                     int
	RunnerSeconds, GPUSeconds int64
}

// Tx is the transaction a digest is written in.
type Tx = record.Tx

// Sender puts the digest's Slack message in the outbox, in the
// transaction: a message of the repository's own, not a PR's thread.
type Sender func(tx Tx, repo, channel, text, links string) error

// Digester composes and schedules the digests.
type Digester struct {
	Cfg *config.Live
	// Audit lists the audit records of repo from since up to (not
	// including) until, oldest first.
	Audit func(repo string, since, until time.Time) ([]record.AuditRecord, error)
	Send  Sender
	// Web is GitHub's web base, for links ("https://github.com/").
	Web string
	Now func() time.Time
}

// Data is the digest sequence's own state: the end of the last window
// sent (the next digest starts there, so no time is left out or told
// twice, whatever the schedule becomes).
type Data struct {
	LastEnd time.Time `json:"last_end,omitzero"`
}

// Next is the first time at or after now that is day at hour (UTC).
func Next(now time.Time, day time.Weekday, hour int) time.Time {
	t := time.Date(now.UTC().Year(), now.UTC().Month(), now.UTC().Day(), hour, 0, 0, 0, time.UTC)
	for t.Weekday() != day || t.Before(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// Kind is the digest's sequence kind, stepped by d.
func (d *Digester) Kind() seq.Kind { return seq.Kind{Name: Kind, Wake: d.wake} }

// Schedule makes each served repository's digest sequence due at its next
// send, when digests are on: one it has not is made; one not yet due whose
// time the configuration changed is moved (one already due is left, to be
// sent). With digests off, the ones there are end.
func (d *Digester) Schedule(tx record.Tx, now time.Time) error {
	cfg := d.Cfg.Get()
	for i := range cfg.Repos {
		rc := &cfg.Repos[i]
		cur, err := tx.Sequence(rc.Name, 0, Kind)
		if err != nil {
			return err
		}
		on := cfg.Slack.Digest == "weekly" && cfg.SlackChannelFor(rc) != ""
		want := Next(now, cfg.Slack.DigestWeekday(), cfg.Slack.DigestHour)
		switch {
		case on && (cur == nil || cur.Done):
			s := &record.Sequence{Kind: Kind, Repo: rc.Name, PR: 0, Step: "scheduled", Data: json.RawMessage(`{}`), WakeAt: want}
			if cur != nil {
				s.Data = cur.Data // where the last window ended stays known
			}
			if err := tx.PutSequence(s, 0); err != nil {
				return err
			}
		case on && cur.WakeAt.After(now) && !cur.WakeAt.Equal(want):
			next := *cur
			next.WakeAt = want
			if err := tx.PutSequence(&next, cur.Version); err != nil {
				return err
			}
		case !on && cur != nil && !cur.Done:
			next := *cur
			next.Step, next.Done = "off", true
			if err := tx.PutSequence(&next, cur.Version); err != nil {
				return err
			}
		}
	}
	return nil
}

// wake sends the digest of the window since the last one (at most two
// weeks; the seven days before the due time for the first), once, and
// schedules the next. The audit is read before the write: the write only
// checks that the sequence did not move and puts the message out.
func (d *Digester) wake(_ context.Context, rc *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
	ref := w.Ref
	cfg := d.Cfg.Get()
	ch := cfg.SlackChannelFor(rc)
	s := w.Seq // the engine read it, at the version that was due
	var data Data
	if len(s.Data) > 0 {
		if err := json.Unmarshal(s.Data, &data); err != nil {
			return "", nil, fmt.Errorf("reading the digest of %s: %w", ref.Repo, err)
		}
	}
	due := s.WakeAt
	now := d.Now()
	if now.Before(due) {
		return "digest-not-due", nil, nil // the clock went back: the next pass wakes it again
	}
	from := due.Add(-7 * 24 * time.Hour)
	if !data.LastEnd.IsZero() && data.LastEnd.Before(due) && data.LastEnd.After(due.Add(-14*24*time.Hour)) {
		from = data.LastEnd
	}
	send := ch != "" && cfg.Slack.Digest == "weekly" && due.After(data.LastEnd)
	var text, links string
	if send {
		recs, err := d.Audit(ref.Repo, from, due)
		if err != nil {
			return "", nil, err
		}
		text, links = Text(d.Web, ref.Repo, isoWeek(from), from, due, recs)
	}
	return "digest", func(tx record.Tx) error {
		cur, err := tx.Sequence(ref.Repo, 0, Kind)
		if err != nil || cur == nil || cur.Done || cur.Version != ref.Version {
			return err // moved meanwhile: its own wake-up comes
		}
		if send {
			if err := d.Send(tx, ref.Repo, ch, text, links); err != nil {
				return err
			}
			data.LastEnd = due
		}
		next := *cur
		next.Step = "scheduled"
		next.WakeAt = Next(now.Add(time.Minute), cfg.Slack.DigestWeekday(), cfg.Slack.DigestHour)
		if next.Data, err = json.Marshal(data); err != nil {
			return err
		}
		return tx.PutSequence(&next, cur.Version)
	}, nil
}

func isoWeek(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}

// Text is the digest of repo's records recs of the week from..to, in
// Markdown (the Slack mirror turns it into mrkdwn), with a line of links.
func Text(web, repo, week string, from, to time.Time, recs []record.AuditRecord) (string, string) {
	var skips, refusals, expired, merged, stopped, succeeded, unfinished, asked, recovered, unrecovered, ingestFailed int
	followed := map[[2]string]bool{}
	failedRuns, rerunOK := map[[2]int64]bool{}, map[[2]int64]bool{}
	var runner, gpu, recoveredGPU int64
	who := map[string]int{}
	prs := map[int]bool{}
	for _, r := range recs {
		switch {
		case r.Kind == record.AuditDecision && r.Outcome == string(record.Skip):
			skips++
			runner += r.RunnerSeconds
			gpu += r.GPUSeconds
			if r.ActorLogin != "" {
				who[r.ActorLogin]++
			}
			prs[r.PR] = true
		case r.Kind == record.AuditPin && r.Outcome == string(record.PinExpired):
			expired++
		case r.Kind == record.AuditCommand && (r.Outcome == "denied" || r.Outcome == "rejected"):
			refusals++
		case r.Kind == record.AuditMerge && r.Outcome == "merged":
			merged++
			prs[r.PR] = true
		case r.Kind == record.AuditMerge && r.Outcome == "stopped":
			stopped++
		case r.Kind == record.AuditAfterMerge && r.Outcome == "waiting_run":
			followed[[2]string{fmt.Sprint(r.PR), r.HeadSHA}] = true // a merge's watch (its merge commit), once
		case r.Kind == record.AuditAfterMerge && r.Outcome == "expired":
			unfinished++
		case r.Kind == record.AuditAfterMerge && r.Outcome == "failed":
			failedRuns[[2]int64{int64(r.PR), r.RunID}] = true // each attempt that failed, and the deadline after one
		case r.Kind == record.AuditAfterMerge && r.Outcome == "rerun":
			asked++ // a re-run of failed jobs opsbot asked GitHub for (/rerun-failed)
		case r.Kind == record.AuditAfterMerge && r.Outcome == "recover_succeeded":
			recovered++                  // an ingest recovery whose run succeeded (/recover-ingest)
			recoveredGPU += r.GPUSeconds // the reused run's: what a re-run of the sweep would have spent again
		case r.Kind == record.AuditAfterMerge && (r.Outcome == "recover_failed" || r.Outcome == "recover_expired"):
			unrecovered++
		case r.Kind == record.AuditAfterMerge && (r.Outcome == "succeeded" || r.Outcome == "ingest_failed"):
			succeeded++ // the main run's success; ingest_failed: the results repository's ingest run it started failed
			rerunOK[[2]int64{int64(r.PR), r.RunID}] = true
			if r.Outcome == "ingest_failed" {
				ingestFailed++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "📊 **Weekly reuse digest for %s** (%s, %s to %s UTC)\n\n", mdtext.Text(repo), week,
		from.UTC().Format("Jan 2 15:04"), to.UTC().Format("Jan 2 15:04"))
	fmt.Fprintf(&b, "- %d %s skipped their sweep, saving %s runner hours", skips, plural(skips, "push", "pushes"), runs.Hours(runner))
	if gpu > 0 {
		fmt.Fprintf(&b, " (%s GPU hours)", runs.Hours(gpu))
	}
	b.WriteString("\n")
	if len(who) > 0 {
		names := make([]string, 0, len(who))
		for n := range who {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool {
			if who[names[i]] != who[names[j]] {
				return who[names[i]] > who[names[j]]
			}
			return names[i] < names[j]
		})
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s (%d)", mdtext.Mention(n), who[n]))
		}
		fmt.Fprintf(&b, "- authorized by %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "- %d %s expired unused\n", expired, plural(expired, "pin", "pins"))
	fmt.Fprintf(&b, "- %d %s refused\n", refusals, plural(refusals, "command", "commands"))
	fmt.Fprintf(&b, "- merges with reuse: %d merged, %d stopped\n", merged, stopped)
	if len(followed)+succeeded+len(failedRuns)+unfinished+asked+recovered+unrecovered > 0 {
		reruns := 0
		for k := range failedRuns {
			if rerunOK[k] {
				reruns++
			}
		}
		fmt.Fprintf(&b, "- after the merge: %d followed, %d main %s succeeded, %d failed (%d of those succeeded at a re-run; %d %s asked through opsbot), %d not finished by the deadline\n",
			len(followed), succeeded, plural(succeeded, "run", "runs"), len(failedRuns), reruns, asked, plural(asked, "re-run", "re-runs"), unfinished)
		if ingestFailed > 0 {
			fmt.Fprintf(&b, "- ingests downstream: %d of the succeeded main runs started an ingest run in the results repository that failed\n", ingestFailed)
		}
		if recovered+unrecovered > 0 {
			fmt.Fprintf(&b, "- ingest recoveries: %d succeeded", recovered)
			if recoveredGPU > 0 {
				fmt.Fprintf(&b, " (%s GPU hours a re-run of the sweep would have spent)", runs.Hours(recoveredGPU))
			}
			fmt.Fprintf(&b, ", %d failed or unfinished\n", unrecovered)
		}
	}
	nums := make([]int, 0, len(prs))
	for n := range prs {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	var links []string
	for i, n := range nums {
		if i == 10 {
			links = append(links, fmt.Sprintf("and %d more", len(nums)-10))
			break
		}
		links = append(links, fmt.Sprintf("<%s/%s/pull/%d|#%d>", strings.TrimSuffix(web, "/"), repo, n, n))
	}
	return b.String(), strings.Join(links, " · ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
