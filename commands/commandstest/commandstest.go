// Package commandstest gives tests a registry of opsbot's commands. It is
// linked into no binary (go list -deps ./cmd/opsbot shows it absent).
package commandstest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/all"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Registry is the registry of opsbot's own commands, the server's list
// (commands/all) in its order, made from an empty state in memory and no
// GitHub (reaching nothing, for tests that only read comments), with each
// of replace in place of the module of the same command (a handler a test
// made).
func Registry(replace ...commands.Module) *commands.Registry {
	mods := all.Modules(commands.Deps{State: &Tx{}})
	for _, r := range replace {
		found := false
		for i := range mods {
			if mods[i].Spec.Name == r.Spec.Name {
				mods[i], found = r, true
			}
		}
		if !found {
			panic("commandstest: no command " + r.Spec.Name + " to replace")
		}
	}
	reg, err := commands.RegistryOf(mods)
	if err != nil {
		panic(err)
	}
	return reg
}

// Tx is record.Tx in memory, for handlers' unit tests without a store: it
// keeps what a command's write did (the audit, the notices, the pins, the
// stage requests) for the test to read. One PR's pins are kept per
// repo#PR; budgets are unlimited unless set.
type Tx struct {
	Clock   time.Time
	Records []record.AuditRecord
	Notices []record.Notice
	PinList []record.Pin // every pin, in grant order
	Stages  []record.StageRequest
	Marks   map[int64]record.CommentMark
	Infos   map[string]record.PRInfo
	Seqs    map[string]record.Sequence // by repo#PR kind
	// ApprovalList holds the approvals by repo and id.
	ApprovalList map[string]record.Approval
	// Offers are the buttons offered, with their uses, by nonce.
	Offers map[string]*record.Offer
	// NoReplies and NoReactions spend the budgets.
	NoReplies, NoReactions bool
	nextID                 uint64
	slots                  map[string]uint64
}

var _ record.Tx = (*Tx)(nil)

func (t *Tx) Now() time.Time {
	if t.Clock.IsZero() {
		return time.Unix(1_800_000_000, 0).UTC()
	}
	return t.Clock
}

func (t *Tx) id() uint64 { t.nextID++; return t.nextID }

func (t *Tx) Audit(r record.AuditRecord) error {
	if r.Time.IsZero() {
		r.Time = t.Now()
	}
	r.Seq = uint64(len(t.Records) + 1)
	t.Records = append(t.Records, r)
	return nil
}

func (t *Tx) Enqueue(n *record.Notice) error {
	n.ID, n.CreatedAt = t.id(), t.Now()
	t.Notices = append(t.Notices, *n)
	return nil
}

func (t *Tx) Withdraw(id uint64) (bool, error) {
	for i, n := range t.Notices {
		if n.ID == id {
			t.Notices = append(t.Notices[:i], t.Notices[i+1:]...)
			return true, nil
		}
	}
	return false, nil
}

func prKey(repo string, pr int) string { return fmt.Sprintf("%s#%d", repo, pr) }

func (t *Tx) PRInfo(repo string, pr int) (*record.PRInfo, error) {
	if p, ok := t.Infos[prKey(repo, pr)]; ok {
		return &p, nil
	}
	return nil, nil
}

func (t *Tx) PutPRInfo(p *record.PRInfo) error {
	if t.Infos == nil {
		t.Infos = map[string]record.PRInfo{}
	}
	t.Infos[prKey(p.Repo, p.PR)] = *p
	return nil
}

func (t *Tx) Sequence(repo string, pr int, kind string) (*record.Sequence, error) {
	if s, ok := t.Seqs[prKey(repo, pr)+" "+kind]; ok {
		return &s, nil
	}
	return nil, nil
}

// PutSequence keeps the store's guard: the version read must be the one
// stored (0: none, or a done one).
func (t *Tx) PutSequence(s *record.Sequence, read uint64) error {
	cur, _ := t.Sequence(s.Repo, s.PR, s.Kind)
	if (cur == nil && read != 0) || (cur != nil && cur.Version != read && !(read == 0 && cur.Done)) {
		return fmt.Errorf("commandstest: the sequence %s %s#%d changed since it was read", s.Kind, s.Repo, s.PR)
	}
	if cur == nil || cur.Done {
		s.Started = t.Now()
	}
	s.Version, s.Updated = 1, t.Now()
	if cur != nil {
		s.Version = cur.Version + 1
	}
	if s.Done {
		s.WakeAt = time.Time{}
	}
	if t.Seqs == nil {
		t.Seqs = map[string]record.Sequence{}
	}
	t.Seqs[prKey(s.Repo, s.PR)+" "+s.Kind] = *s
	return nil
}

// PutApproval keeps the store's rule: a run is bound to one approval.
func (t *Tx) PutApproval(a *record.Approval) error {
	if t.ApprovalList == nil {
		t.ApprovalList = map[string]record.Approval{}
	}
	for _, have := range t.ApprovalList {
		if a.RunID != 0 && have.Repo == a.Repo && have.RunID == a.RunID && have.ID != a.ID {
			return record.ErrRunBound
		}
	}
	if had, ok := t.ApprovalList[a.Repo+" "+a.ID]; ok {
		if err := record.CheckApprovalMove(had.State, a.State); err != nil {
			return err
		}
	} else if a.State != record.ApprovalActive {
		return record.ErrApprovalMoved
	}
	if a.At.IsZero() {
		a.At = t.Now()
	}
	a.Updated = t.Now()
	t.ApprovalList[a.Repo+" "+a.ID] = *a
	return nil
}

// Approval reads an approval by id.
func (t *Tx) Approval(repo, id string) (*record.Approval, error) {
	a, ok := t.ApprovalList[repo+" "+id]
	if !ok {
		return nil, nil
	}
	return &a, nil
}

// Approvals are a PR's approvals, newest first.
func (t *Tx) Approvals(repo string, pr int) ([]record.Approval, error) {
	var out []record.Approval
	for _, a := range t.ApprovalList {
		if a.Repo == repo && a.PR == pr {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b record.Approval) int { return b.At.Compare(a.At) })
	return out, nil
}

// Decision is not kept in memory: handlers' tests do not decide.
func (t *Tx) Decision(string, int, string) (*record.Decision, error) { return nil, nil }

// StagedRun is the request that staged a run (none when it was not).
func (t *Tx) StagedRun(repo string, runID int64) (*record.StageRequest, error) {
	for _, r := range t.Stages {
		if r.Repo == repo && r.RunID == runID && r.State == record.StageStaged {
			return &r, nil
		}
	}
	return nil, nil
}

var _ commands.State = (*Tx)(nil)

// WakeSequences makes the PR's sequences not done due by at.
func (t *Tx) WakeSequences(repo string, pr int, at time.Time) error {
	for k, s := range t.Seqs {
		if due := record.WakeAfterEvent(&s, at); s.Repo == repo && s.PR == pr && !s.Done && (s.WakeAt.IsZero() || s.WakeAt.After(due)) {
			s.WakeAt, s.Version, s.Updated = due, s.Version+1, t.Now()
			t.Seqs[k] = s
		}
	}
	return nil
}

func (t *Tx) ActivePin(repo string, pr int) (*record.Pin, error) {
	for i := range t.PinList {
		if p := t.PinList[i]; p.Repo == repo && p.PR == pr && p.State == record.PinActive {
			return &p, nil
		}
	}
	return nil, nil
}

func (t *Tx) Grant(p *record.Pin, c record.PinChange) (*record.Pin, error) {
	old, _ := t.ActivePin(p.Repo, p.PR)
	if old != nil {
		if err := t.Transition(old, record.PinSuperseded, c); err != nil {
			return nil, err
		}
	}
	p.ID, p.State, p.CreatedAt = t.id(), record.PinActive, t.Now()
	t.PinList = append(t.PinList, *p)
	return old, t.Audit(record.AuditRecord{Kind: record.AuditPin, Outcome: string(record.PinActive), Repo: p.Repo, PR: p.PR,
		RunID: p.RunID, PinID: p.ID, ActorID: c.ActorID, ActorLogin: c.ActorLogin, Reason: c.Reason, OriginRef: c.OriginRef})
}

func (t *Tx) Transition(p *record.Pin, to record.PinState, c record.PinChange) error {
	for i := range t.PinList {
		if t.PinList[i].ID == p.ID {
			if t.PinList[i].State != record.PinActive {
				return fmt.Errorf("commandstest: pin %d is %s, not active", p.ID, t.PinList[i].State)
			}
			t.PinList[i].State, t.PinList[i].ClosedReason, t.PinList[i].ClosedAt = to, c.Reason, t.Now()
			*p = t.PinList[i]
			return t.Audit(record.AuditRecord{Kind: record.AuditPin, Outcome: string(to), Repo: p.Repo, PR: p.PR, RunID: p.RunID,
				PinID: p.ID, ActorID: c.ActorID, ActorLogin: c.ActorLogin, Reason: c.Reason, OriginRef: c.OriginRef})
		}
	}
	return fmt.Errorf("commandstest: no pin %d", p.ID)
}

// OverrideDecision is not kept in memory: handlers' tests do not decide.
func (t *Tx) OverrideDecision(repo string, pr int, sha, login string) error {
	return fmt.Errorf("commandstest: no decision of %s#%d@%s to override", repo, pr, sha)
}

// OfferButtons keeps an offer under a new nonce ("offer-N").
func (t *Tx) OfferButtons(o *record.Offer) error {
	if t.Offers == nil {
		t.Offers = map[string]*record.Offer{}
	}
	t.nextID++
	o.Nonce, o.At, o.Uses = fmt.Sprintf("offer-%d", t.nextID), t.Now(), nil
	c := *o
	t.Offers[o.Nonce] = &c
	return nil
}

// UseButton uses up a button of an offer once.
func (t *Tx) UseButton(repo, nonce string, u record.ButtonUse) error {
	o := t.Offers[nonce]
	if o == nil || o.Repo != repo || !slices.Contains(o.Actions, u.Action) {
		return fmt.Errorf("%w: %s of %q", record.ErrButtonUnknown, u.Action, nonce)
	}
	if o.Used(u.Action) != nil {
		return fmt.Errorf("%w: %s of %q", record.ErrButtonUsed, u.Action, nonce)
	}
	o.Uses = append(o.Uses, u)
	return nil
}

// ExpectUpdate records the base tip on the PR's active merge pin.
func (t *Tx) ExpectUpdate(repo string, pr int, id uint64, base, tree, commit string) error {
	for i := range t.PinList {
		if p := &t.PinList[i]; p.ID == id && p.Repo == repo && p.PR == pr && p.State == record.PinActive && p.ExpectParent != "" {
			p.ExpectBase, p.ExpectTree, p.ExpectCommit = base, tree, commit
			return nil
		}
	}
	return fmt.Errorf("commandstest: no active merge pin %d", id)
}

func (t *Tx) CommentMark(_ string, id int64) (record.CommentMark, error) { return t.Marks[id], nil }

func (t *Tx) CommentSeen(_ string, id int64) (bool, error) {
	if t.Marks == nil {
		t.Marks = map[int64]record.CommentMark{}
	}
	seen := t.Marks[id] == record.MarkProcessed
	t.Marks[id] = record.MarkProcessed
	return seen, nil
}

func (t *Tx) TakeReply(string, int64, int) (bool, error)         { return !t.NoReplies, nil }
func (t *Tx) TakeReaction(string, int64, int, int) (bool, error) { return !t.NoReactions, nil }

func (t *Tx) AddStageRequest(r *record.StageRequest) error {
	r.Seq = t.id()
	t.Stages = append(t.Stages, *r)
	return nil
}

// MoveStageRequest keeps the store's guard: the stored request must be in
// from, and the move one record.StageMoves allows.
func (t *Tx) MoveStageRequest(r *record.StageRequest, from record.StageState) error {
	for i := range t.Stages {
		if t.Stages[i].Seq == r.Seq {
			if err := record.CheckStageMove(t.Stages[i].State, from, r.State); err != nil {
				return err
			}
			t.Stages[i] = *r
			return nil
		}
	}
	return fmt.Errorf("commandstest: no stage request %d", r.Seq)
}

// StageRequestByOrigin finds the request an origin (kind and id) made.
func (t *Tx) StageRequestByOrigin(repo string, o record.Origin) (*record.StageRequest, error) {
	for i := range t.Stages {
		if r := t.Stages[i]; r.Repo == repo && r.Origin().Same(o) {
			return &r, nil
		}
	}
	return nil, nil
}

func (t *Tx) StageRequestByComment(repo string, id int64) (*record.StageRequest, error) {
	return t.StageRequestByOrigin(repo, record.Origin{Kind: record.OriginComment, ID: id})
}

func (t *Tx) StageRequests(repo string) ([]record.StageRequest, error) {
	var out []record.StageRequest
	for _, r := range t.Stages {
		if r.Repo == repo {
			out = append(out, r)
		}
	}
	return out, nil
}

func (t *Tx) SlotHolder(repo string) (*record.StageRequest, error) {
	seq, ok := t.slots[repo]
	if !ok {
		return nil, nil
	}
	for i := range t.Stages {
		if r := t.Stages[i]; r.Seq == seq {
			return &r, nil
		}
	}
	return nil, nil
}

func (t *Tx) SetSlotHolder(r *record.StageRequest) error {
	if t.slots == nil {
		t.slots = map[string]uint64{}
	}
	t.slots[r.Repo] = r.Seq
	return nil
}

// Clone is a copy of t that shares nothing with it: a test applies a write
// to the copy and keeps it only if the write succeeded, as a store rolls
// back a failed transaction.
func (t *Tx) Clone() *Tx {
	c := *t
	c.Records = slices.Clone(t.Records)
	c.Notices = slices.Clone(t.Notices)
	c.PinList = slices.Clone(t.PinList)
	c.Stages = slices.Clone(t.Stages)
	c.Marks = maps.Clone(t.Marks)
	c.Infos = maps.Clone(t.Infos)
	c.slots = maps.Clone(t.slots)
	return &c
}
