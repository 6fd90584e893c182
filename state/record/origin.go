package record

// OriginKind is what started a command, and so a pin or a stage request:
// a PR comment today; a check run's requested action or a Slack click are
// kinds to come.
type OriginKind string

// Origin kinds, as stored.
const (
	OriginComment  OriginKind = "comment"   // a PR conversation comment; ID is the comment's
	OriginSlack    OriginKind = "slack"     // a click on a button in Slack; ID is a digest of the click
	OriginCheckRun OriginKind = "check_run" // a click on a check run's button; ID is a digest of the click
)

// Origin is where a command came from: its kind, its id among that kind,
// and the page that shows it.
type Origin struct {
	Kind OriginKind
	ID   int64
	URL  string
}

// originOf reads a stored origin: records written before origins had kinds
// name a comment.
func originOf(kind OriginKind, id int64, url string) Origin {
	if kind == "" {
		kind = OriginComment
	}
	return Origin{Kind: kind, ID: id, URL: url}
}

// storedKind is how a kind is stored: a comment as "", as every record
// written before origins had kinds (so the stored form did not change).
func storedKind(k OriginKind) OriginKind {
	if k == OriginComment {
		return ""
	}
	return k
}

// Same reports whether o and p are the same origin (kind and id; the page
// may be spelled differently by a webhook and by the API).
func (o Origin) Same(p Origin) bool { return o.Kind == p.Kind && o.ID == p.ID }
