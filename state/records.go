package state

import "github.com/SemiAnalysisAI/opsbot/state/record"

// The records live in state/record, which links no storage; these names
// keep state's callers as they were.
type (
	Pin          = record.Pin
	PinState     = record.PinState
	PinChange    = record.PinChange
	Verdict      = record.Verdict
	Decision     = record.Decision
	PRInfo       = record.PRInfo
	CommentMark  = record.CommentMark
	ReasonCode   = record.ReasonCode
	Why          = record.Why
	AuditRecord  = record.AuditRecord
	StageRequest = record.StageRequest
	Notice       = record.Notice
	NoticeKind   = record.NoticeKind
	SlackMessage = record.SlackMessage
	OriginRef    = record.OriginRef
	AllowedUser  = record.AllowedUser
	Sequence     = record.Sequence
	SeqRef       = record.SeqRef
)

// Pin states.
const (
	PinActive     = record.PinActive
	PinConsumed   = record.PinConsumed
	PinSuperseded = record.PinSuperseded
	PinRevoked    = record.PinRevoked
	PinInvalid    = record.PinInvalid
	PinExpired    = record.PinExpired
)

// Verdicts.
const (
	Skip  = record.Skip
	Sweep = record.Sweep
)

// Comment marks.
const (
	MarkNone      = record.MarkNone
	MarkProcessed = record.MarkProcessed
	MarkEdited    = record.MarkEdited
	MarkDeleted   = record.MarkDeleted
)

// Reason codes.
const (
	ReasonNotGateAction    = record.ReasonNotGateAction
	ReasonNotGated         = record.ReasonNotGated
	ReasonNoPin            = record.ReasonNoPin
	ReasonNoPinWhenDecided = record.ReasonNoPinWhenDecided
	ReasonRecorded         = record.ReasonRecorded
	ReasonPinnedAtHead     = record.ReasonPinnedAtHead
	ReasonUncheckable      = record.ReasonUncheckable
	ReasonGitHubError      = record.ReasonGitHubError
	ReasonGitHubErrorKept  = record.ReasonGitHubErrorKept
	ReasonRunRejected      = record.ReasonRunRejected
	ReasonNotHead          = record.ReasonNotHead
	ReasonNotHeadRejected  = record.ReasonNotHeadRejected
	ReasonReuse            = record.ReasonReuse
	ReasonPinChanged       = record.ReasonPinChanged
	ReasonMerged           = record.ReasonMerged
	ReasonMergeRejected    = record.ReasonMergeRejected
)

// Stage request states.
const (
	StageRequested = record.StageRequested
	StageStarted   = record.StageStarted
	StageStaged    = record.StageStaged
	StageFailed    = record.StageFailed
	StageReplaced  = record.StageReplaced
	StageUnstaged  = record.StageUnstaged
	StageCancelled = record.StageCancelled
)

// Notice channels and kinds.
const (
	ChannelGitHub  = record.ChannelGitHub
	ChannelSlack   = record.ChannelSlack
	NoticeComment  = record.NoticeComment
	NoticeEdit     = record.NoticeEdit
	NoticeReaction = record.NoticeReaction
	NoticeStatus   = record.NoticeStatus
	NoticeDispatch = record.NoticeDispatch
	NoticeSlack    = record.NoticeSlack
	NoticeCheckRun = record.NoticeCheckRun
)

// Marker is the hidden text a comment notice carries (record.Marker).
func Marker(id uint64, nonce string) string { return record.Marker(id, nonce) }

var _ record.Tx = (*Tx)(nil)
