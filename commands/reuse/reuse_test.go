package reuse_test

import (
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

func TestPinnedReplyGolden(t *testing.T) {
	p := &record.Pin{RunID: 31147925932, RunURL: "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932",
		RunConclusion: "success", RunSHA: "11b75f153aaaa", RunAttempt: 1, PRHeadAtGrant: "8d034aa96d34", ActorLogin: "Ankur-singh"}
	golden.Assert(t, "pinned.md", reuse.PinnedReply(p))
	p.Bare = true
	golden.Assert(t, "pinned-bare.md", reuse.PinnedReply(p))
}
