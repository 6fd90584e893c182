package record

// OriginKind is what started a command, and so a pin or a stage request:
// a PR comment today; a check run's requested action or a Slack click are
// kinds to come.
type OriginKind string

// Origin kinds, as stored.
const (
	OriginComment  OriginKind = "comment"   // a PR conversation comment; ID is the comment's
	OriginSlack    OriginKind = "slack"     // a click on a button in Slack; ID is a sum of the click
	OriginCheckRun OriginKind = "check_run" // a click on a check run's button; ID is a sum of the click
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

// OriginRef is an origin as the records that keep one store it (pins,
// stage requests, audit records, pin changes): embedded in each, with the
// field names and JSON they always had, so nothing stored migrates.
type OriginRef struct {
	// CommentID and CommentURL are the id and page of the origin (its
	// comment, for the kind that is a comment); OriginKind is its kind, ""
	// for a comment (records written before other kinds).
	CommentID  int64      `json:"comment_id,omitempty"`
	CommentURL string     `json:"comment_url,omitempty"`
	OriginKind OriginKind `json:"origin_kind,omitempty"`
}

// Origin is the origin kept.
func (o OriginRef) Origin() Origin { return originOf(o.OriginKind, o.CommentID, o.CommentURL) }

// SetOrigin keeps origin x.
func (o *OriginRef) SetOrigin(x Origin) {
	o.CommentID, o.CommentURL, o.OriginKind = x.ID, x.URL, storedKind(x.Kind)
}
