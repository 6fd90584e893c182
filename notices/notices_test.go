package notices

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/state"
)

const repo = "SemiAnalysisAI/InferenceX"

func TestTextsGolden(t *testing.T) {
	skip := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "8d034aa96d340b569de06f4e45886179210f00ed", Decision: state.Skip,
		Why: state.Why{Code: state.ReasonReuse, RunID: 31147925932, Actor: "Ankur-singh"}, RunID: 31147925932, RunAttempt: 1,
		RunURL: "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932", RunSHA: "11b75f153aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		ActorLogin: "Ankur-singh", CommentURL: "https://github.com/SemiAnalysisAI/InferenceX/pull/2512#issuecomment-1", DecidedAt: time.Unix(0, 0)}
	sweep := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "9e0", Decision: state.Sweep, Why: state.Why{Code: state.ReasonNoPin}}
	invalid := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "9e0abcdef", Decision: state.Sweep,
		Why: state.Why{Code: state.ReasonRunRejected, RunID: 31147925932, Detail: "the result artifacts of run 31147925932 have expired"}}
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

// The words of a decision live here: the comment about an invalid pin reads
// the decision's code and details, never the stored sentence, so the gate
// cannot break it by rewording.
func TestInvalidTextReadsTheReasonCode(t *testing.T) {
	pin := &state.Pin{Repo: repo, PR: 2512, RunID: 42, ActorLogin: "maintainer", State: state.PinInvalid}
	for _, tc := range []struct {
		why  state.Why
		want string
	}{
		{state.Why{Code: state.ReasonRunRejected, RunID: 42, Detail: "run 42 was cancelled"}, "is invalid**: run 42 was cancelled."},
		{state.Why{Code: state.ReasonMergeRejected, RunID: 42, Detail: "`boom`"}, "is invalid**: `boom`."},
		{state.Why{Code: state.ReasonUncheckable, RunID: 42, Detail: "`no key`"}, "is invalid**: could not be checked: `no key`."},
		{state.Why{Code: state.ReasonGitHubError, RunID: 42, Detail: "`502`"}, "is invalid**: could not be checked (GitHub: `502`)."},
	} {
		t.Run(string(tc.why.Code), func(t *testing.T) {
			d := &state.Decision{Repo: repo, PR: 2512, HeadSHA: "9e0abcdef", Decision: state.Sweep, Why: tc.why,
				Reason: "a sentence the gate worded differently"}
			if got := InvalidText("", d, pin); !strings.Contains(got, tc.want) {
				t.Fatalf("InvalidText = %q, want it to contain %q", got, tc.want)
			}
			if got := StatusText(d); !strings.HasPrefix(got, "sweep: pinned run 42 ") {
				t.Fatalf("StatusText = %q, want it worded from the code", got)
			}
		})
	}
}

// Every reason code the gate can store has words.
func TestEveryReasonCodeIsWorded(t *testing.T) {
	for _, c := range []state.ReasonCode{state.ReasonNotGateAction, state.ReasonNoPin, state.ReasonNoPinWhenDecided,
		state.ReasonPinnedAtHead, state.ReasonUncheckable, state.ReasonGitHubError, state.ReasonRunRejected, state.ReasonNotHead,
		state.ReasonNotHeadRejected, state.ReasonReuse, state.ReasonPinChanged, state.ReasonMerged, state.ReasonMergeRejected} {
		if got := Reason(state.Why{Code: c, RunID: 42, Actor: "maintainer", Detail: "why"}); strings.HasPrefix(got, "reason ") {
			t.Errorf("Reason(%s) = %q: the code has no words", c, got)
		}
	}
}
