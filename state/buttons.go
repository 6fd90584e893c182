package state

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// offerKey is repo \0 nonce.
func offerKey(repo, nonce string) []byte {
	k := append(repoKey(repo), 0)
	return append(k, nonce...)
}

// nonceText is how a nonce is written: lower-case base32, no padding.
var nonceText = base32.StdEncoding.WithPadding(base32.NoPadding)

// OfferButtons records an offer of buttons (record.Tx): o gets a new
// nonce, unguessable and never given before, and the time. Each time
// opsbot offers buttons it makes a new one.
func (t *Tx) OfferButtons(o *record.Offer) error {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("making a button nonce: %w", err)
	}
	o.Nonce = strings.ToLower(nonceText.EncodeToString(raw[:]))
	o.At, o.Uses = t.now(), nil
	o.Head = strings.ToLower(o.Head)
	return putJSON(t.tx.Bucket(bOffers), offerKey(o.Repo, o.Nonce), o)
}

// UseButton uses up one button of an offer (record.Tx), whatever its click
// then did: an error wrapping record.ErrButtonUnknown when the repository
// has no offer of that nonce or the offer has no such button, and one
// wrapping record.ErrButtonUsed when the button was used before; nothing
// is written then.
func (t *Tx) UseButton(repo, nonce string, u record.ButtonUse) error {
	bk := t.tx.Bucket(bOffers)
	k := offerKey(repo, nonce)
	var o record.Offer
	ok, err := getJSON(bk, k, &o)
	if err != nil {
		return err
	}
	if !ok || nonce == "" || !slices.Contains(o.Actions, u.Action) {
		return fmt.Errorf("%w: %s of offer %q in %s", record.ErrButtonUnknown, u.Action, nonce, repo)
	}
	if o.Used(u.Action) != nil {
		return fmt.Errorf("%w: %s of offer %q in %s", record.ErrButtonUsed, u.Action, nonce, repo)
	}
	if u.At.IsZero() {
		u.At = t.now()
	}
	o.Uses = append(o.Uses, u)
	return putJSON(bk, k, o)
}

// ButtonOffer reads an offer of buttons by its nonce (nil: the repository
// has none of that nonce).
func (s *Store) ButtonOffer(repo, nonce string) (*record.Offer, error) {
	if nonce == "" {
		return nil, nil
	}
	var out *record.Offer
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bOffers)
		if bk == nil {
			return nil // a database opened read-only before offers were kept
		}
		var o record.Offer
		ok, err := getJSON(bk, offerKey(repo, nonce), &o)
		if err != nil || !ok {
			return err
		}
		out = &o
		return nil
	})
	return out, err
}

// offersNonced (schema 7 to 8) drops the check-run buttons used by check
// run id: a button is now its offer's nonce (bOffers), and a check run
// offered before carries none, so a click on it is refused as unknown.
func offersNonced(tx *bolt.Tx) error {
	if tx.Bucket([]byte("buttons")) == nil {
		return nil
	}
	return tx.DeleteBucket([]byte("buttons"))
}
