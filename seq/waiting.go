package seq

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// DataOf decodes a sequence's data as its kind's type D.
func DataOf[D any](s *record.Sequence) (D, error) {
	var d D
	if err := json.Unmarshal(s.Data, &d); err != nil {
		return d, fmt.Errorf("reading the %s sequence of %s#%d: %w", s.Kind, s.Repo, s.PR, err)
	}
	return d, nil
}

// Waiting is a step that leaves its sequence waiting: the record's next
// version in Step, due at WakeAt, with the kind's Data (which holds what
// the status comment says, Is); the status comment edited (Edit) when what
// it says changed from Was; and the move audited when the step changed or
// the trail grew (Audit, its outcome the step and its actor and origin the
// sequence's). Every kind writes its waits this way.
type Waiting struct {
	Cur     *record.Sequence
	Step    string
	WakeAt  time.Time
	Data    any
	Is, Was Status
	Edit    func(next *record.Sequence) plan.Edit
	Audit   record.AuditRecord
}

// Put is the wait's write, guarded by the version read.
func (w Waiting) Put() (plan.PutSequence, error) {
	next := *w.Cur
	next.Step, next.WakeAt = w.Step, w.WakeAt
	var err error
	if next.Data, err = json.Marshal(w.Data); err != nil {
		return plan.PutSequence{}, fmt.Errorf("writing the %s sequence of %s#%d: %w", next.Kind, next.Repo, next.PR, err)
	}
	ps := plan.PutSequence{Seq: next, Read: w.Cur.Version}
	moved, changed := w.Is.Moved(w.Was, w.Step, w.Cur.Step)
	if changed {
		e := w.Edit(&next)
		ps.Edit = &e
	}
	if moved {
		rec := w.Audit
		rec.Outcome, rec.Repo, rec.PR, rec.ActorLogin, rec.ActorID = w.Step, w.Cur.Repo, w.Cur.PR, w.Cur.ActorLogin, w.Cur.ActorID
		rec.SetOrigin(w.Cur.Origin())
		ps.Audit = rec
	}
	return ps, nil
}
