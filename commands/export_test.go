package commands

import "strings"

// ParseFull is Parse with the whole of goldmark and its own reader: the
// reference the bounded parse is held to.
func (r *Registry) ParseFull(body string, opt Options) []Command {
	body = Newlines(body)
	if !MayHoldCommand(body) || TooDeep(body) {
		return nil
	}
	return r.parseLines(paragraphLinesFull(strings.TrimPrefix(body, "\ufeff")), opt)
}
