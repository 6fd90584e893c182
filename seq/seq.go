// Package seq is opsbot's engine for multi-step work (a merge request, a
// stage request, an approval): a sequence is a durable record (state's
// Sequence: its step, its data, a wake-up time and a deadline) whose
// transitions are guarded by its version. Nothing waits in memory: one
// Ticker turns every sequence that is due into a wake-up delivery, which
// the intake stores and the worker processes in order with the PR's
// webhooks, like any delivery; a restart loses nothing, since what was due
// is due again. A step is level-triggered: it re-reads what it acts on
// (the PR, its head, its checks) and acts only if the world still matches.
package seq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Event is the event name of a wake-up delivery. Wake-ups come only from
// the Ticker: their ids start with IDPrefix, which the webhook refuses.
const Event = "opsbot_wakeup"

// IDPrefix starts the id of every wake-up delivery.
const IDPrefix = "opsbot-wake-"

// Payload is a wake-up delivery's body: the repository and PR (as a
// webhook names them, so the intake orders it with the PR's webhooks) and
// the sequence and version that were due.
type Payload struct {
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Number int           `json:"number"`
	Wakeup record.SeqRef `json:"opsbot_wakeup"`
	// Window is the retry window the wake-up was handed over in: each
	// window's wake-up of a version is a delivery of its own, in its id
	// and its body alike (the intake also drops a body it has stored
	// before), so one that failed for good or changed nothing is
	// delivered again in the next window.
	Window int64 `json:"window"`
}

// Delivery is the wake-up delivery of a due sequence, handed over in
// retry window w (Retry apart): its id names the sequence, the version that
// is due and the window, so a sequence handed over again before it moved is
// stored once, while one whose wake-up failed for good (dead-lettered) or
// changed nothing is woken again in the next window. The id is a hash: no
// two sequences share one, whatever their names hold.
func Delivery(ref record.SeqRef, w int64) (id string, body []byte) {
	var p Payload
	p.Repository.FullName, p.Number, p.Wakeup, p.Window = ref.Repo, ref.PR, ref, w
	body, _ = json.Marshal(p) // plain strings and numbers: cannot fail
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%d", strings.ToLower(ref.Repo), ref.Kind, ref.PR, ref.Version, w))
	return IDPrefix + hex.EncodeToString(sum[:16]), body
}

// Retry is how long a due sequence whose wake-up was handed over waits
// before it is handed over again, should it not have moved meanwhile.
const Retry = 10 * time.Minute

// Kind is one kind of sequence: its name (stored in the record), its
// step, which a wake-up runs, and how it ends at its deadline.
//
// The engine (events' wake-up route) owns what every kind shares: it reads
// the sequence and steps it only at the version that was due; at or past
// its deadline it runs Expire instead of Wake; a step that yields (ErrYield)
// is woken again once what waits for the PR was processed; and a step that
// left the sequence as it was, still due, is not woken again until an
// event, its next wake-up or its deadline.
type Kind struct {
	Name string
	// Wake steps the sequence, due now: it re-reads the world and returns
	// the write of the sequence's next version (in the write, the record
	// is read again: a version other than the one read moved meanwhile,
	// and its own wake-up comes) with what it does. An error is retried as
	// any delivery's, and in the next retry window after that.
	Wake func(ctx context.Context, rc *config.Repo, w Wakeup) (outcome string, wr Write, err error)
	// Expire ends the sequence at its deadline, whatever it waits for (nil:
	// the engine ends it as "expired"). A kind whose deadline is not an end
	// (stage's next report deadline) steps it as it sees fit.
	Expire func(ctx context.Context, rc *config.Repo, w Wakeup) (outcome string, wr Write, err error)
	// Cleanup deletes what a done sequence left on GitHub
	// (record.Sequence.Left): the engine runs it instead of Wake while a
	// done sequence holds something, from the write that ended it (due at
	// once) until a write of Cleanup's own drops the last of it. A kind
	// that makes nothing on GitHub leaves it nil.
	Cleanup func(ctx context.Context, rc *config.Repo, w Wakeup) (outcome string, wr Write, err error)
	// Routes are the webhook events, besides pull_request (which wakes
	// every kind), whose deliveries wake the PR's sequences, each with how
	// its PR is found and what it records (Route): the kind's own event
	// routes. opsbot subscribes to, stores and routes an event only while a
	// kind routes it (or, for check_run and workflow_run, a command offers
	// buttons).
	Routes []Route
	// OnStart is what a command that begins a sequence of this kind on a
	// PR that has a live one comes to (one live sequence per PR and kind):
	// Refuse (the default) answers which sequence waits and how to stop it;
	// Replace ends the live one ("replaced") and begins the new one.
	OnStart Conflict
	// Stop is the command line that stops a live sequence of the kind
	// ("/merge-with-reuse cancel"), said to a second command that is
	// refused ("": none; it ends at its deadline).
	Stop string
}

// Conflict is what beginning a sequence does where one of its kind lives.
type Conflict int

// What a second sequence of a kind does while one lives.
const (
	Refuse Conflict = iota
	Replace
)

// Wakeup is one step of a sequence: the sequence as read, at the version
// that was due, and the engine's services to the step.
type Wakeup struct {
	Ref record.SeqRef
	// Seq is the sequence as stored when the step began, at Ref.Version.
	Seq *record.Sequence
	Now time.Time
	// Clear is asked right before an act that cannot be taken back (a
	// merge, a branch update, a dispatch): ErrYield when a delivery that
	// may stop the sequence (a comment, a click, a change of the PR) waits
	// in the inbox for the PR, so the step returns it and runs again after
	// that delivery; another error is a read that failed. Nil in tests
	// that step a kind alone.
	Clear func() error
	// Marks are the process's marks of acts it cannot take back, the
	// engine's (commands.Deps.Acts): Send uses an act's mark up in them.
	Marks *Marks
}

// CheckClear is w.Clear(), or nil when the step has no engine behind it.
func (w Wakeup) CheckClear() error {
	if w.Clear == nil {
		return nil
	}
	return w.Clear()
}

// ErrYield is a step that did not act because a delivery that may stop
// its sequence waits for the PR: the engine wakes the sequence again once
// that delivery was processed.
var ErrYield = errors.New("seq: a delivery that may stop the sequence waits in the inbox; stepped again after it")

// Write is a step's change, committed with the wake-up's processing.
type Write func(tx record.Tx) error

// Ticker hands a wake-up delivery to the intake for each due sequence.
type Ticker struct {
	// Due lists the sequences due now (state.Store.DueSequences).
	Due func(now time.Time, max int) ([]record.SeqRef, error)
	// Served says whether opsbot serves a repository: the sequences of one
	// it no longer serves wait, handed over to nobody, until it is again.
	Served func(repo string) bool
	// Take stores and queues a delivery (the intake); a duplicate is fine.
	Take func(ctx context.Context, event, id string, body []byte) error
	Now  func() time.Time
	Log  *slog.Logger
	// Every is the time between passes; 0 is 5 s.
	Every time.Duration
	// Observe, when set, is told how many sequences were due at each pass
	// (of repositories served), handed over or not.
	Observe func(due int)

	mu     sync.Mutex
	handed map[string]bool // the wake-up ids handed over that are still due
}

// MaxPerTick bounds the wake-ups one pass hands over; the rest come next.
const MaxPerTick = 500

// maxListed bounds the due sequences one pass reads (those of repositories
// not served, and those handed over already, are passed over).
const maxListed = 20 * MaxPerTick

// Tick hands over what is due now and was not handed over in this retry
// window, at most MaxPerTick, and says how many.
func (t *Ticker) Tick(ctx context.Context) (int, error) {
	now := t.Now()
	due, err := t.Due(now, maxListed)
	if err != nil {
		return 0, fmt.Errorf("listing the sequences due: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	handed := map[string]bool{} // what stays handed over: still due, in this window
	n, served := 0, 0
	var failed error
	defer func() {
		if t.Observe != nil {
			t.Observe(served)
		}
	}()
	for _, ref := range due {
		if t.Served != nil && !t.Served(ref.Repo) {
			continue
		}
		served++
		id, body := Delivery(ref, now.Unix()/int64(Retry/time.Second))
		if t.handed[id] {
			handed[id] = true // stored already: its processing comes
			continue
		}
		if n >= MaxPerTick || failed != nil {
			continue // the next pass
		}
		if err := t.Take(ctx, Event, id, body); err != nil {
			failed = fmt.Errorf("handing over the wake-up of %s %s#%d: %w", ref.Kind, ref.Repo, ref.PR, err)
			continue
		}
		handed[id] = true
		n++
	}
	t.handed = handed
	if failed != nil {
		return n, failed
	}
	return n, nil
}

// Run ticks until ctx ends; a failed pass is logged and tried at the next.
func (t *Ticker) Run(ctx context.Context) {
	every := t.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		if _, err := t.Tick(ctx); err != nil && ctx.Err() == nil {
			t.Log.Error("waking due sequences failed; trying again at the next tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// Marks are the marks of the acts this process is about to take that
// cannot be taken back (a merge, a branch update, a dispatch). A step
// records a mark in its sequence (a write of its own) before the act, and
// the next step sends it, once, in the process that made it. A mark a step
// finds that this process did not make (it was made before a restart, and
// the act may have been sent just before the crash) or that it tried
// already (its answer was lost) is an act that may have been taken: the
// step decides from what GitHub shows, and never sends it again blindly.
type Marks struct {
	mu   sync.Mutex
	made map[string]time.Time // made by this process, not tried yet: when
	now  func() time.Time     // nil: the wall clock (tests move their own)
}

func (m *Marks) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

// live reports whether mark is made and not tried, within its life
// (m.mu held).
func (m *Marks) live(mark string, now time.Time) bool {
	at, ok := m.made[mark]
	return mark != "" && ok && now.Sub(at) <= MarkLife
}

// MarkLife is how long a mark made and never tried stays this process's:
// every kind sends a mark within minutes of making it, or makes a new one
// (a mark found older is taken as not this process's: GitHub is read
// before anything is said). Older ones are dropped as marks are made, so
// the marks of sequences that ended before their act was sent do not
// pile up in a long-running process.
const MarkLife = 24 * time.Hour

// New is a new mark, made by this process.
func (m *Marks) New() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on the systems opsbot runs on
	}
	id := hex.EncodeToString(b[:])
	m.mu.Lock()
	now := m.clock()
	defer m.mu.Unlock()
	if m.made == nil {
		m.made = map[string]time.Time{}
	}
	maps.DeleteFunc(m.made, func(_ string, at time.Time) bool { return now.Sub(at) > MarkLife })
	m.made[id] = now
	return id
}

// Fresh reports whether mark was made by this process and not tried.
func (m *Marks) Fresh(mark string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live(mark, m.clock())
}

// Try uses mark up: true once, for a mark this process made; the act it
// marks may be sent then, and never again under that mark.
func (m *Marks) Try(mark string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live(mark, m.clock()) {
		return false
	}
	delete(m.made, mark)
	return true
}

// restore makes mark this process's, untried, again: its act's request
// was stopped before anything of it went out (Sending).
func (m *Marks) restore(mark string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.made == nil {
		m.made = map[string]time.Time{}
	}
	m.made[mark] = m.clock()
}

// Status is what a sequence's status comment says, the one comment its
// steps edit: a title (Markdown), what happened (a line a step) and what
// happens now. Kinds share its shape, so every sequence reads alike.
type Status struct {
	Title string
	Trail []string
	Now   string
}

// Text is the comment's body.
func (s Status) Text() string {
	var b strings.Builder
	b.WriteString(s.Title + "\n\n")
	for _, l := range s.Trail {
		b.WriteString("- " + l + "\n")
	}
	if s.Now != "" {
		b.WriteString("- " + s.Now + "\n")
	}
	return b.String()
}

// Moved reports whether a step moved the sequence on, for the audit: its
// step changed, or its trail grew. Changed reports whether the status
// comment says something new (moved, or what happens now changed).
func (s Status) Moved(was Status, step, wasStep string) (moved, changed bool) {
	moved = step != wasStep || len(s.Trail) != len(was.Trail)
	return moved, moved || s.Now != was.Now
}
