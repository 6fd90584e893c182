package record

// ReasonCode is why the gate decided as it did. The words are notices'.
type ReasonCode string

// Reason codes, as stored.
const (
	ReasonNotGateAction    ReasonCode = "not_gate_action"     // Action is not one of GateActions
	ReasonNotGated         ReasonCode = "not_gated"           // the workflow does not gate the PR's pushes (Detail: draft, its labels); nothing decided
	ReasonNoPin            ReasonCode = "no_pin"              // no active pin
	ReasonNoPinWhenDecided ReasonCode = "no_pin_when_decided" // a pin came while the head was decided
	ReasonPinnedAtHead     ReasonCode = "pinned_at_head"      // the pin was taken on this head: it covers the next
	ReasonUncheckable      ReasonCode = "uncheckable"         // no validator for the installation (Detail)
	ReasonGitHubError      ReasonCode = "github_error"        // GitHub failed while the run was checked (Detail); the pin became invalid (decisions before the pin was kept)
	ReasonGitHubErrorKept  ReasonCode = "github_error_kept"   // GitHub failed while the run was checked (Detail); the pin stays for the next push
	ReasonRunRejected      ReasonCode = "run_rejected"        // the run no longer qualifies (Detail)
	ReasonNotHead          ReasonCode = "not_head"            // the commit is no longer the head (GitHubHead is)
	ReasonNotHeadRejected  ReasonCode = "not_head_rejected"   // not the head, and the run does not qualify for it (Detail)
	ReasonReuse            ReasonCode = "reuse"               // skip: the pinned run is reused
	ReasonPinChanged       ReasonCode = "pin_changed"         // the pin changed while the head was decided
	ReasonMerged           ReasonCode = "merged"              // the merge consumed the pin
	ReasonMergeRejected    ReasonCode = "merge_rejected"      // the run no longer qualified at merge (Detail)
	// ReasonRecorded is the code schema 5 gave a decision made before
	// decisions carried codes: Detail is its reason as it was recorded.
	ReasonRecorded ReasonCode = "recorded"
)

// Why is a decision's reason: a code and the details its words need.
type Why struct {
	Code ReasonCode `json:"code"`
	// RunID and Actor are the pin's run and the login that pinned it.
	RunID int64  `json:"run_id,omitempty"`
	Actor string `json:"actor,omitempty"`
	// Detail is a rule's refusal (runs writes it as Markdown) or GitHub's
	// error as a code span.
	Detail      string   `json:"detail,omitempty"`
	SHA         string   `json:"sha,omitempty"`         // the commit decided
	PR          int      `json:"pr,omitempty"`          // its PR
	GitHubHead  string   `json:"github_head,omitempty"` // the head GitHub gave
	Action      string   `json:"action,omitempty"`
	GateActions []string `json:"gate_actions,omitempty"`
}
