package state

import (
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Each offer of buttons gets a nonce of its own; each of its buttons is
// used once, whatever its click did; a nonce of another repository, none
// at all, or a button the offer did not hold is unknown.
func TestButtonOffersAreUsedOnce(t *testing.T) {
	s := openTest(t, nil)
	var a, b record.Offer
	if err := s.Update(func(tx *Tx) error {
		a = record.Offer{Repo: "o/r", PR: 3, Head: "ABC", Surface: record.OfferCheckRun, Actions: []string{"reuse", "merge"}}
		b = record.Offer{Repo: "o/r", PR: 3, Head: "abc", Surface: record.OfferSlack, Actions: []string{"reuse"}}
		if err := tx.OfferButtons(&a); err != nil {
			return err
		}
		return tx.OfferButtons(&b)
	}); err != nil {
		t.Fatal(err)
	}
	if a.Nonce == "" || a.Nonce == b.Nonce || len(a.Nonce) < 26 {
		t.Fatalf("nonces %q and %q: want two different ones of 128 bits", a.Nonce, b.Nonce)
	}
	use := func(repo, nonce, action string) error {
		return s.Update(func(tx *Tx) error {
			return tx.UseButton(repo, nonce, record.ButtonUse{Action: action, By: "maintainer", Delivery: "d1", Outcome: "denied"})
		})
	}
	if err := use("o/r", a.Nonce, "reuse"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, repo, nonce, action string
		want                      error
	}{
		{"used again", "o/r", a.Nonce, "reuse", record.ErrButtonUsed},
		{"another repository", "o/r2", a.Nonce, "merge", record.ErrButtonUnknown},
		{"no nonce", "o/r", "", "merge", record.ErrButtonUnknown},
		{"not offered", "o/r", b.Nonce, "merge", record.ErrButtonUnknown},
	} {
		if err := use(c.repo, c.nonce, c.action); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := use("o/r", a.Nonce, "merge"); err != nil {
		t.Fatalf("the offer's other button: %v", err)
	}
	if err := use("o/r", b.Nonce, "reuse"); err != nil {
		t.Fatalf("the same button of another offer: %v", err)
	}
	got, err := s.ButtonOffer("O/R", a.Nonce)
	if err != nil || got == nil || got.Head != "abc" || got.Used("reuse") == nil || got.Used("reuse").Outcome != "denied" || got.Used("merge") == nil {
		t.Fatalf("the offer reads %+v, %v", got, err)
	}
	if got, err := s.ButtonOffer("o/r", "nope"); err != nil || got != nil {
		t.Fatalf("an unknown nonce reads %+v, %v", got, err)
	}
}

// A database of schema 7 kept the buttons used by check run id; they are
// dropped, since a check run offered then carries no nonce.
func TestMigrateOffersNonced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket([]byte("buttons"))
		if err != nil {
			return err
		}
		if err := bk.Put([]byte("o/r\x00k"), []byte(`{}`)); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(keySchema, u64(7))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("buttons")) != nil {
			t.Error("the schema 7 buttons are still there")
		}
		if tx.Bucket(bOffers) == nil {
			t.Error("no offers bucket")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
