package main

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// digests are the Slack posts that are weekly digests.
func digests(sl *slacktest.Fake) []slacktest.Post {
	var out []slacktest.Post
	for _, p := range sl.Posts() {
		if strings.Contains(p.Blocks+p.Text, "Weekly reuse digest") {
			out = append(out, p)
		}
	}
	return out
}

// The weekly digest is posted in the repository's channel once a week, at
// slack.digest_day and slack.digest_hour (UTC): the week's skips and who
// authorized them, the hours saved, refusals and merges. A restart neither
// repeats it nor loses the next.
func TestWeeklyDigestOncePerWeekAcrossRestarts(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	// Monday 2026-11-30 08:58 UTC: the digest is due at 09:00.
	clock := e2e.ClockAt(time.Date(2026, 11, 30, 8, 58, 0, 0, time.UTC))
	deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := newWorldOpts(t, worldOpts{
		Top:  "slack:\n  api_url: \"" + sl.URL + "\"\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#sweep-ops\"\n  digest: weekly\n  digest_day: monday\n  digest_hour: 9\n",
		Repo: "    gpus_per_runner: {\"gpu-*\": 8}\n",
		Env:  map[string]string{"TEST_SLACK_TOKEN": "xoxb-test"}, Deps: deps})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	w.Comment(reader, "/reuse-sweep-run 31147925932") // refused
	if n := len(digests(sl)); n != 0 {
		t.Fatalf("%d digests before the hour", n)
	}
	w.PassTime(clock, 3*time.Minute)
	testkit.Eventually(t, "the first digest", func() bool { return len(digests(sl)) == 1 })
	d := digests(sl)[0]
	if d.ThreadTS != "" || d.Channel != "#sweep-ops" {
		t.Fatalf("the digest is not a message of the channel's own: %+v", d)
	}
	mustContain(t, "digest", d.Blocks, "Weekly reuse digest for SemiAnalysisAI/InferenceX", "2026-W48",
		"1 push skipped their sweep, saving 6.1 runner hours (48.0 GPU hours)", "authorized by @maintainer (1)",
		"1 command refused", "merged, 0 stopped", "pull/2512")

	w.Srv.Stop(t)
	w.Srv = startServerWith(t, w.Dir+"/opsbot.yaml", w.Env, deps)
	clock.Add(time.Hour)
	w.Settle()
	time.Sleep(200 * time.Millisecond) // passes of the ticker: nothing is due
	if n := len(digests(sl)); n != 1 {
		t.Fatalf("%d digests after a restart in the same week, want 1", n)
	}
	w.PassTime(clock, 7*24*time.Hour)
	testkit.Eventually(t, "the next week's digest", func() bool { return len(digests(sl)) == 2 })
	mustContain(t, "second digest", digests(sl)[1].Blocks, "2026-W49", "0 pushes skipped their sweep")
}
