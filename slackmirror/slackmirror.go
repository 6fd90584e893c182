// Package slackmirror mirrors opsbot's notices to the maintainers' Slack
// channel: in the notice's own transaction it enqueues the Slack copy, in
// the PR's thread (the thread's parent first, when the PR has none yet),
// its GitHub Markdown turned into Slack mrkdwn that no user text can break
// out of. outbox/slacksend posts what it enqueued. Slack is never on the
// critical path: an outage delays messages and loses none.
package slackmirror

import (
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Mirror enqueues the Slack copy of notices. It implements notices.Mirror.
type Mirror struct {
	Cfg *config.Live
	Web notices.Web
}

var _ notices.Mirror = (*Mirror)(nil)

// MirrorButtons adds a message of Slack's own with buttons to the PR's
// thread (after its parent when it has none yet).
func (m *Mirror) MirrorButtons(tx record.Tx, repo string, pr int, text string, links notices.Links, buttons []record.SlackButton) error {
	return m.post(tx, repo, pr, notices.KindReply, text, links, buttons)
}

// Mirror adds the Slack message for a notice, after the PR's thread parent
// when the PR has none yet.
func (m *Mirror) Mirror(tx record.Tx, repo string, pr int, kind notices.Kind, text string, links notices.Links) error {
	return m.post(tx, repo, pr, kind, text, links, nil)
}

func (m *Mirror) post(tx record.Tx, repo string, pr int, kind notices.Kind, text string, links notices.Links, buttons []record.SlackButton) error {
	rc, _ := m.Cfg.Get().Repo(repo)
	ch := m.Cfg.Get().SlackChannelFor(rc)
	if ch == "" {
		return nil
	}
	info, err := tx.PRInfo(repo, pr)
	if err != nil {
		return err
	}
	if info == nil {
		info = &record.PRInfo{Repo: repo, PR: pr}
	}
	if info.SlackTS == "" && !info.SlackParentQueued {
		if err := tx.Enqueue(&record.Notice{Channel: record.ChannelSlack, Kind: record.NoticeSlack, Repo: repo, PR: pr,
			Slack: &record.SlackMessage{Channel: ch, Parent: true, Text: ParentText(m.Web, info)}}); err != nil {
			return err
		}
		info.SlackParentQueued = true
		if err := tx.PutPRInfo(info); err != nil {
			return err
		}
	}
	return tx.Enqueue(&record.Notice{Channel: record.ChannelSlack, Kind: record.NoticeSlack, Repo: repo, PR: pr,
		Slack: &record.SlackMessage{Channel: ch, Text: FromMarkdown(text), Context: ContextLine(links), Broadcast: kind == notices.KindSkip,
			Buttons: buttons}})
}

// ParentText is the first message of a PR's thread.
func ParentText(web notices.Web, info *record.PRInfo) string {
	url := mdtext.URL(web.PR(info.Repo, info.PR))
	s := fmt.Sprintf("*<%s|%s#%d>*", escapeEntities(url), strings.ReplaceAll(Escape(info.Repo), "|", "¦"), info.PR)
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
		if u := mdtext.URL(url); u != "" {
			parts = append(parts, fmt.Sprintf("<%s|%s>", escapeEntities(u), label))
		}
	}
	add(l.PR, "PR")
	add(l.Comment, "comment")
	add(l.Run, "run")
	add(l.Commit, "commit")
	return strings.Join(parts, " · ")
}

var zeroWidth = "\u200b"

// FromMarkdown turns the GitHub Markdown opsbot writes into Slack mrkdwn. It
// reads it with mdtext.Parse, the reader of the escaper every notice uses,
// so text a user typed (inside a code span or escaped as text) stays text:
// it cannot become a Slack mention, link or formatting. Only opsbot's own
// links, bold and code come out as Slack's.
func FromMarkdown(md string) string {
	var b strings.Builder
	writeNodes(&b, mdtext.Parse(md))
	return strings.TrimSpace(b.String())
}

func writeNodes(b *strings.Builder, nodes []mdtext.Node) {
	for _, n := range nodes {
		switch n.Kind {
		case mdtext.KText:
			b.WriteString(Escape(n.Text))
		case mdtext.KCode:
			b.WriteString(code(n.Text))
		case mdtext.KStrong:
			b.WriteByte('*')
		case mdtext.KLink:
			label := strings.ReplaceAll(Escape(mdtext.Plain(n.Children)), "|", "¦")
			if u := mdtext.URL(n.URL); u != "" {
				fmt.Fprintf(b, "<%s|%s>", escapeEntities(u), label)
			} else {
				b.WriteString(label)
			}
		case mdtext.KFence:
			b.WriteString("```\n" + escapeEntities(strings.ReplaceAll(n.Text, "`", "ˋ")) + "\n```")
		case mdtext.KBreak:
			b.WriteByte('\n')
		case mdtext.KComment, mdtext.KRule: // opsbot's marker; its separator between replies
		}
	}
}

// code is a Slack code span: Slack's spans cannot hold a backtick, so each
// becomes a look-alike; entities are escaped, so no mention comes out.
func code(s string) string {
	s = strings.TrimSpace(oneLine(s))
	if s == "" {
		return ""
	}
	return "`" + escapeEntities(strings.ReplaceAll(s, "`", "ˋ")) + "`"
}

// Escape makes any text safe inside Slack mrkdwn: no entity, mention,
// link (Slack links bare URLs and domains: "://" and every dot between a
// letter or digit and a letter, as in "www.x" in any case or
// "evil.example", get a zero-width space), code (a backtick becomes a look-alike) or formatting
// can come out of it, and it stays on one line.
func Escape(s string) string {
	s = strings.NewReplacer("://", ":"+zeroWidth+"//", "`", "ˋ").Replace(oneLine(s))
	return neutralize(escapeEntities(breakDomains(s)), "*_~")
}

// breakDomains puts a zero-width space after each dot between an ASCII
// letter or digit and a letter (a top-level domain starts with one), so
// Slack sees no domain name to link; "2.5" stays as it is.
func breakDomains(s string) string {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '.' && i > 0 && i+1 < len(s) && alnum(s[i-1]) && alnum(s[i+1]) && (s[i+1] > '9') {
			b.WriteString(zeroWidth)
		}
	}
	return b.String()
}

// oneLine turns line breaks and other control characters into spaces.
func oneLine(s string) string { return mdtext.Line(s) }

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
