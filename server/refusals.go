package server

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// Causes of a delivery refused for its body, as refusal log lines name
// them.
const (
	causeTooLarge    = "too_large"
	causeContentType = "content_type"
	causeBadJSON     = "malformed_json"
	causeFormPayload = "form_without_payload"
	causeSignature   = "bad_signature"
)

// refusalLogEvery is how often, at most, a refusal of one cause is logged:
// the first at once, then one line per interval that counts the ones left
// out. A sender that keeps failing (a webhook set to the wrong content
// type, a stranger's flood) cannot fill the log; a maintainer sees why at
// the first one.
const refusalLogEvery = time.Minute

// refusalLog logs deliveries refused for their bodies or signatures,
// rate-limited per cause and sender network (an address, or its /64 for
// IPv6): one sender's flood cannot hide GitHub's refusals of the same
// cause. At most maxRefusalKeys keys are kept.
type refusalLog struct {
	log   *slog.Logger
	now   func() time.Time
	every time.Duration

	mu     sync.Mutex
	causes map[string]*refusalCause
}

type refusalCause struct {
	last       time.Time
	suppressed int // refusals since last that were not logged
}

func newRefusalLog(log *slog.Logger, now func() time.Time) *refusalLog {
	return &refusalLog{log: log, now: now, every: refusalLogEvery, causes: map[string]*refusalCause{}}
}

// refused logs one refusal of cause, unless one of the same cause was
// logged less than every ago; then it is counted, and the next line says
// how many were left out. detail says what was wrong (a decoder's error).
func (l *refusalLog) refused(cause, id, event, remote, detail string) {
	if l == nil || l.log == nil {
		return
	}
	now := l.now()
	key := cause + "|" + senderNet(remote)
	l.mu.Lock()
	c := l.causes[key]
	if c == nil {
		if len(l.causes) >= maxRefusalKeys {
			for k, v := range l.causes {
				if now.Sub(v.last) >= l.every {
					delete(l.causes, k)
				}
			}
			if len(l.causes) >= maxRefusalKeys {
				clear(l.causes) // a flood from many networks: log afresh rather than grow
			}
		}
		c = &refusalCause{}
		l.causes[key] = c
	} else if now.Sub(c.last) < l.every {
		c.suppressed++
		l.mu.Unlock()
		return
	}
	left := c.suppressed
	c.last, c.suppressed = now, 0
	l.mu.Unlock()
	attrs := []any{"cause", cause, "delivery", clip(id, 128), "event", clip(event, 64), "remote", clip(remote, 64)}
	if detail != "" {
		attrs = append(attrs, "detail", clip(detail, 256))
	}
	if left > 0 {
		attrs = append(attrs, "not_logged_since_last", left)
	}
	msg := "webhook delivery refused for its body"
	if cause == causeSignature {
		msg = "webhook signature rejected"
	}
	l.log.Warn(msg, attrs...)
}

// maxRefusalKeys bounds the senders the refusal log keeps apart.
const maxRefusalKeys = 4096

// senderNet is the network a refusal is counted for: the address, or its
// /64 for IPv6 (one host holds many).
func senderNet(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return clip(host, 64)
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// clip cuts s to at most n bytes: the values come from whoever sent the
// request.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
