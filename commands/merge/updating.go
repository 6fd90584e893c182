package merge

import (
	"context"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

// updating waits for the push of the update asked: GitHub's merge of the
// base into the head read, whose decision reused the pinned run.
func (st *stepper) updating(ctx context.Context, head string) (plan.Plan, string, error) {
	cur := st.cur
	if strings.EqualFold(head, cur.Head) {
		if st.now.Sub(st.data.UpdateAsked) > UpdateWait {
			what := "GitHub made no push %s after the update was asked"
			if st.data.Built != "" {
				what = "no push of opsbot's merge came %s after it was about to be pushed"
			}
			return st.stopped("update_lost", fmt.Sprintf(what+": update the branch by hand, then pin a run again", commands.Span(UpdateWait)))
		}
		return st.wait(StepUpdating, "⏳ waiting for the update's push", "merge-waiting-update")
	}
	if st.data.Built == "" || !strings.EqualFold(head, st.data.Built) {
		// Not the merge opsbot made itself (known by its SHA, whoever GitHub
		// records as its committer): GitHub's update-branch merge of the
		// base into the head read, signed and committed by GitHub, or a
		// push by someone else.
		cm, err := st.gh.CommitInfo(ctx, cur.Repo, head)
		if err != nil {
			return plan.Plan{}, "", err
		}
		if st.data.Built != "" || len(cm.Parents) != 2 || !strings.EqualFold(cm.Parents[0], cur.Head) ||
			(st.data.UpdateBase != "" && !strings.EqualFold(cm.Parents[1], st.data.UpdateBase)) || !cm.ByGitHub {
			// Not the merge of the base into the head read: a push by
			// someone else, on top of the update or instead of it.
			return st.stopped("pushed", fmt.Sprintf("the new head %s is not the branch update opsbot asked for (a merge of the base into %s): "+
				"a push by someone else", mdtext.ShortSHA(head), mdtext.ShortSHA(cur.Head)))
		}
	}
	d, err := st.h.State.Decision(cur.Repo, cur.PR, head)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if d == nil {
		if st.now.Sub(st.data.UpdateAsked) > UpdateWait {
			return st.stopped("undecided", fmt.Sprintf("the push %s was never decided by opsbot's gate", mdtext.ShortSHA(head)))
		}
		return st.wait(StepUpdating, "⏳ waiting for opsbot's gate to decide the update's push", "merge-waiting-decision")
	}
	if !d.Skipped() || d.RunID != st.data.RunID || d.PinID != st.data.PinID {
		// The gate took it for another push (its content is not GitHub's
		// merge of the two, say): it sweeps. A skip on another pin of the
		// same run (one that replaced the merge's, covering any push) is not
		// the update's either.
		return st.stopped("pushed", fmt.Sprintf("the push %s after the update did not reuse run %d (%s): it sweeps. "+
			"Run `/merge-with-reuse` again once its sweep has run", mdtext.ShortSHA(head), st.data.RunID, mdtext.Text(d.Reason)))
	}
	st.data.Decided = head
	st.data.Trail = append(st.data.Trail, fmt.Sprintf("✅ branch updated to %s: its sweep is skipped, reusing run %s",
		mdtext.Code(mdtext.ShortSHA(head)), commands.RunLink(st.data.RunID, st.data.RunURL)))
	return st.checks(ctx, head)
}
