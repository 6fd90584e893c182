package state

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

func stageBucket(tx *bolt.Tx, repo string, write bool) (*bolt.Bucket, error) {
	root := tx.Bucket(bStage)
	if b := root.Bucket(repoKey(repo)); b != nil || !write {
		return b, nil
	}
	return root.CreateBucket(repoKey(repo))
}

var (
	pStageReq     = "r:"
	pStageComment = "c:" // a comment's request: its id
	pStageOrigin  = "o:" // another origin's request: its kind \0 id
	kStageSlot    = []byte("slot")
)

// AddStageRequest appends a request to the repository's queue.
func (t *Tx) AddStageRequest(r *StageRequest) error {
	b, err := stageBucket(t.tx, r.Repo, true)
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	r.V, r.Seq = 1, seq
	r.CreatedAt, r.UpdatedAt = t.now(), t.now()
	if err := putJSON(b, append([]byte(pStageReq), u64(seq)...), r); err != nil {
		return err
	}
	return b.Put(stageOriginKey(r.Origin()), u64(seq))
}

// MoveStageRequest stores r in its new State, provided the stored request
// is still in from and the move is allowed (record.StageMoves).
func (t *Tx) MoveStageRequest(r *StageRequest, from record.StageState) error {
	b, err := stageBucket(t.tx, r.Repo, true)
	if err != nil {
		return err
	}
	cur, err := stageBySeq(b, u64(r.Seq))
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%w: stage request %d of %s is not stored", record.ErrStageMoved, r.Seq, r.Repo)
	}
	if err := record.CheckStageMove(cur.State, from, r.State); err != nil {
		return fmt.Errorf("stage request %d of %s: %w", r.Seq, r.Repo, err)
	}
	r.UpdatedAt = t.now()
	return putJSON(b, append([]byte(pStageReq), u64(r.Seq)...), r)
}

// stageOriginKey is the index key of the request an origin made: a
// comment's as it always was, another kind's by kind and id, so no two
// origins share one.
func stageOriginKey(o record.Origin) []byte {
	if o.Kind == record.OriginComment {
		return append([]byte(pStageComment), u64(uint64(o.ID))...)
	}
	k := append([]byte(pStageOrigin), o.Kind...)
	return append(append(k, 0), u64(uint64(o.ID))...)
}

// StageRequestByOrigin finds the request an origin made.
func (t *Tx) StageRequestByOrigin(repo string, o record.Origin) (*StageRequest, error) {
	b, err := stageBucket(t.tx, repo, false)
	if err != nil || b == nil {
		return nil, err
	}
	return stageBySeq(b, b.Get(stageOriginKey(o)))
}

// StageRequestByComment finds the request a comment made.
func (t *Tx) StageRequestByComment(repo string, commentID int64) (*StageRequest, error) {
	return t.StageRequestByOrigin(repo, record.Origin{Kind: record.OriginComment, ID: commentID})
}

// StageRequestByComment finds the request a comment made, outside a write.
func (s *Store) StageRequestByComment(repo string, commentID int64) (*StageRequest, error) {
	var r *StageRequest
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, err = (&Tx{tx: tx}).StageRequestByComment(repo, commentID)
		return err
	})
	return r, err
}

// stageBySeq reads the request stored under seq (nil seq: none).
func stageBySeq(b *bolt.Bucket, seq []byte) (*StageRequest, error) {
	if seq == nil {
		return nil, nil
	}
	var r StageRequest
	ok, err := getJSON(b, append([]byte(pStageReq), seq...), &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

// StageRequests lists a repository's requests in order (the queue).
func (t *Tx) StageRequests(repo string) ([]StageRequest, error) {
	return stageRequests(t.tx, repo)
}

func stageRequests(tx *bolt.Tx, repo string) ([]StageRequest, error) {
	b, err := stageBucket(tx, repo, false)
	if err != nil || b == nil {
		return nil, err
	}
	var out []StageRequest
	c := b.Cursor()
	p := []byte(pStageReq)
	for k, v := c.Seek(p); k != nil && len(k) == len(p)+8 && string(k[:len(p)]) == pStageReq; k, v = c.Next() {
		var r StageRequest
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// StageRequests lists a repository's requests outside a write.
func (s *Store) StageRequests(repo string) ([]StageRequest, error) {
	var out []StageRequest
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = stageRequests(tx, repo)
		return err
	})
	return out, err
}

// SlotHolder returns the request whose run holds the shared staging slot.
func (t *Tx) SlotHolder(repo string) (*StageRequest, error) {
	b, err := stageBucket(t.tx, repo, false)
	if err != nil || b == nil {
		return nil, err
	}
	return stageBySeq(b, b.Get(kStageSlot))
}

// SetSlotHolder records which request holds the shared slot.
func (t *Tx) SetSlotHolder(r *StageRequest) error {
	b, err := stageBucket(t.tx, r.Repo, true)
	if err != nil {
		return err
	}
	return b.Put(kStageSlot, u64(r.Seq))
}

// StagedRun finds the newest staged request for a run, if it is on the site.
func (s *Store) StagedRun(repo string, runID int64) (*StageRequest, error) {
	var found *StageRequest
	err := s.db.View(func(tx *bolt.Tx) error {
		reqs, err := stageRequests(tx, repo)
		if err != nil {
			return err
		}
		for i := len(reqs) - 1; i >= 0; i-- {
			if reqs[i].RunID == runID && reqs[i].State == StageStaged {
				found = &reqs[i]
				return nil
			}
		}
		return nil
	})
	return found, err
}
