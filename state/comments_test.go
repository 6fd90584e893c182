package state

import (
	"context"
	"slices"
	"testing"
	"time"
)

// createdDelivery is a stored `created` delivery of comment id on o/r#7.
func createdDelivery(id string, comment int64) *Delivery {
	return &Delivery{ID: id, Event: "issue_comment", Action: "created", Repo: "o/r", PR: 7, CommentID: comment,
		ReceivedAt: time.Unix(1700000000, 0), Body: []byte(`{"comment":"` + id + `"}`)}
}

// Recovery's mark and a comment's `created` delivery, in both orders: a
// delivery stored before the mark is written keeps the comment (its
// processing runs it), one stored after finds it processed.
func TestNoteCommentsLeavesWaitingDeliveriesAlone(t *testing.T) {
	ctx := context.Background()
	why := func(id int64) *AuditRecord {
		return &AuditRecord{Kind: "recovery", Outcome: "recorded", Repo: "o/r", PR: 7, OriginRef: OriginRef{CommentID: id}}
	}
	t.Run("delivery stored, then recovery's mark", func(t *testing.T) {
		s := openTest(t, nil)
		d := createdDelivery("d-1", 41)
		if _, err := s.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
		other := createdDelivery("d-2", 42) // another repository's comment 42 is not this one
		other.Repo, other.Body = "o/r2", []byte(`{"other":1}`)
		if _, err := s.Append(ctx, other); err != nil {
			t.Fatal(err)
		}
		summary := AuditRecord{Kind: "recovery", Outcome: "recorded", Repo: "o/r"}
		left, err := s.NoteComments("o/r", []CommentNote{{CommentID: 41, Audit: why(41)}, {CommentID: 42, Audit: why(42)}}, []AuditRecord{summary})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(left, []int64{41}) {
			t.Fatalf("left alone %v, want [41]: its delivery is waiting", left)
		}
		if m, _ := s.CommentMark("o/r", 41); m != MarkNone {
			t.Fatalf("comment 41 is %v, want no mark: its delivery decides", m)
		}
		if m, _ := s.CommentMark("o/r", 42); m != MarkProcessed {
			t.Fatalf("comment 42 is %v, want processed", m)
		}
		recs, _, _ := s.Audit(AuditQuery{Kind: "recovery"})
		var got []int64
		for _, r := range recs {
			got = append(got, r.CommentID)
		}
		slices.Sort(got)
		if !slices.Equal(got, []int64{0, 42}) {
			t.Fatalf("recovery audit of comments %v, want the summary and 42 only", got)
		}
		// The delivery's processing then runs the comment: its plan's Once finds it new.
		var seen bool
		if err := s.Complete(d, "done", func(tx *Tx) error {
			var err error
			seen, err = tx.CommentSeen("o/r", 41)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if seen {
			t.Fatal("the waiting delivery found its comment processed: recovery dropped it")
		}
	})
	t.Run("recovery's mark, then the delivery", func(t *testing.T) {
		s := openTest(t, nil)
		left, err := s.NoteComments("o/r", []CommentNote{{CommentID: 41, Audit: why(41)}}, nil)
		if err != nil || len(left) != 0 {
			t.Fatalf("NoteComments = %v, %v; want 41 marked", left, err)
		}
		d := createdDelivery("d-1", 41)
		if _, err := s.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
		var seen bool
		if err := s.Complete(d, "done", func(tx *Tx) error {
			var err error
			seen, err = tx.CommentSeen("o/r", 41)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !seen {
			t.Fatal("a delivery stored after recovery's mark ran the comment recovery did not run")
		}
	})
	t.Run("a mark written since recovery read the comment", func(t *testing.T) {
		s := openTest(t, nil)
		if err := s.Update(func(tx *Tx) error { return tx.NoteComment("o/r", 41, false) }); err != nil {
			t.Fatal(err)
		}
		left, err := s.NoteComments("o/r", []CommentNote{{CommentID: 41, Audit: why(41)}}, nil)
		if err != nil || !slices.Equal(left, []int64{41}) {
			t.Fatalf("NoteComments = %v, %v; want 41 left alone", left, err)
		}
		if m, _ := s.CommentMark("o/r", 41); m != MarkEdited {
			t.Fatalf("comment 41 is %v, want the edit's mark kept", m)
		}
		if recs, _, _ := s.Audit(AuditQuery{Kind: "recovery"}); len(recs) != 0 {
			t.Fatalf("recovery audited a comment it left alone: %+v", recs)
		}
	})
}
