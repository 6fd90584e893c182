// Package notify mirrors opsbot's notices to the maintainers' Slack
// channel with slack-go: one thread per PR, Block Kit messages with links,
// sent from the outbox with retries that honour Retry-After. Slack is never
// on the critical path: an outage delays messages and loses none.
package notify

import (
	"fmt"
	"regexp"
	"strings"

	"opsbot/config"
	"opsbot/notices"
	"opsbot/state"
)

// Mirror enqueues the Slack copy of notices. It implements notices.Mirror.
type Mirror struct {
	Cfg *config.Config
	Web notices.Web
}

var _ notices.Mirror = (*Mirror)(nil)

// Mirror adds the Slack message for a notice, after the PR's thread parent
// when the PR has none yet.
func (m *Mirror) Mirror(tx *state.Tx, repo string, pr int, kind, text string, links notices.Links) error {
	rc, _ := m.Cfg.Repo(repo)
	ch := m.Cfg.SlackChannelFor(rc)
	if ch == "" {
		return nil
	}
	info, err := tx.PRInfo(repo, pr)
	if err != nil {
		return err
	}
	if info == nil {
		info = &state.PRInfo{Repo: repo, PR: pr}
	}
	if info.SlackTS == "" && !info.SlackParentQueued {
		if err := tx.Enqueue(&state.Notice{Channel: state.ChannelSlack, Kind: state.NoticeSlack, Repo: repo, PR: pr,
			Slack: &state.SlackMessage{Channel: ch, Parent: true, Text: ParentText(m.Web, info)}}); err != nil {
			return err
		}
		info.SlackParentQueued = true
		if err := tx.PutPRInfo(info); err != nil {
			return err
		}
	}
	return tx.Enqueue(&state.Notice{Channel: state.ChannelSlack, Kind: state.NoticeSlack, Repo: repo, PR: pr,
		Slack: &state.SlackMessage{Channel: ch, Text: FromMarkdown(text), Context: ContextLine(links), Broadcast: kind == "skip"}})
}

// ParentText is the first message of a PR's thread.
func ParentText(web notices.Web, info *state.PRInfo) string {
	url := web.PR(info.Repo, info.PR)
	s := fmt.Sprintf("*<%s|%s#%d>*", Escape(url), Escape(info.Repo), info.PR)
	if info.Title != "" {
		s += " " + Escape(info.Title)
	}
	if info.Author != "" {
		s += " by " + Escape(info.Author)
	}
	return s
}

// ContextLine is the links under a message.
func ContextLine(l notices.Links) string {
	var parts []string
	add := func(url, label string) {
		if url != "" {
			parts = append(parts, fmt.Sprintf("<%s|%s>", Escape(url), label))
		}
	}
	add(l.PR, "PR")
	add(l.Comment, "comment")
	add(l.Run, "run")
	add(l.Commit, "commit")
	return strings.Join(parts, " · ")
}

var (
	mdLink    = regexp.MustCompile(`\[([^\]\n]*)\]\((https?://[^)\s]+)\)`)
	mdBold    = regexp.MustCompile(`\*\*([^*\n]+)\*\*`)
	mdMarker  = regexp.MustCompile(`(?s)<!--.*?-->`)
	mdHRule   = regexp.MustCompile(`(?m)^---$`)
	zeroWidth = "\u200b"
)

// FromMarkdown turns the GitHub Markdown opsbot writes into Slack mrkdwn.
// Everything is escaped first, so text a user typed (carried inside the
// reply) cannot become a mention, a link or formatting; then opsbot's own
// links and bold become Slack's.
func FromMarkdown(md string) string {
	md = mdMarker.ReplaceAllString(md, "")
	md = mdHRule.ReplaceAllString(md, "")
	var b strings.Builder
	last := 0
	for _, m := range mdLink.FindAllStringSubmatchIndex(md, -1) {
		b.WriteString(convertPlain(md[last:m[0]]))
		text, url := md[m[2]:m[3]], md[m[4]:m[5]]
		fmt.Fprintf(&b, "<%s|%s>", Escape(url), strings.ReplaceAll(Escape(text), "|", "¦"))
		last = m[1]
	}
	b.WriteString(convertPlain(md[last:]))
	return strings.TrimSpace(b.String())
}

func convertPlain(s string) string {
	s = escapeEntities(s)
	// Bold first: **x** is opsbot's own emphasis.
	s = mdBold.ReplaceAllString(s, "\x00$1\x00")
	// Code spans keep their backticks; other formatting characters are neutralized.
	s = neutralize(s, "*_~")
	return strings.ReplaceAll(s, "\x00", "*")
}

// Escape makes any text safe inside Slack mrkdwn: no entity, mention,
// link or formatting can come out of it.
func Escape(s string) string {
	return neutralize(escapeEntities(s), "*_~`")
}

func escapeEntities(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// neutralize puts a zero-width space after each formatting character so
// Slack does not pair them.
func neutralize(s, chars string) string {
	if !strings.ContainsAny(s, chars) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
		if strings.ContainsRune(chars, r) {
			b.WriteString(zeroWidth)
		}
	}
	return b.String()
}
