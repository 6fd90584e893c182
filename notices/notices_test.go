package notices

import (
	"strings"
	"testing"
	"time"

	"opsbot/internal/golden"
	"opsbot/state"
)

const repo = "SemiAnalysisAI/InferenceX"

func TestTextsGolden(t *testing.T) {
	skip := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "8d034aa96d340b569de06f4e45886179210f00ed", Decision: "skip",
		Reason: "reusing run 31147925932, authorized by @Ankur-singh", RunID: 31147925932, RunAttempt: 1,
		RunURL: "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932", RunSHA: "11b75f153aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		ActorLogin: "Ankur-singh", CommentURL: "https://github.com/SemiAnalysisAI/InferenceX/pull/2512#issuecomment-1", DecidedAt: time.Unix(0, 0)}
	sweep := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "9e0", Decision: "sweep", Reason: "no reuse authorization"}
	invalid := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "9e0abcdef", Decision: "sweep",
		Reason: "pinned run 31147925932 no longer qualifies: the result artifacts of run 31147925932 have expired"}
	pin := &state.Pin{Repo: repo, PR: 2512, RunID: 31147925932, ActorLogin: "Ankur-singh", State: state.PinInvalid}
	var b strings.Builder
	for _, d := range []*state.Decision{skip, sweep, invalid} {
		b.WriteString(StatusText(d) + "\n")
	}
	golden.Assert(t, "status.txt", b.String())
	golden.Assert(t, "skip.md", SkipText("", skip))
	golden.Assert(t, "invalid.md", InvalidText("", invalid, pin))
	for _, d := range []*state.Decision{skip, sweep, invalid} {
		if n := len(StatusText(d)); n > 140 {
			t.Errorf("status %q is %d characters; GitHub allows 140", StatusText(d), n)
		}
	}
}
