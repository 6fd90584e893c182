package commands

import "strings"

// ParseFull is Parse with the whole of goldmark and its own reader: the
// reference the bounded parse is held to.
func (r *Registry) ParseFull(body string, opt Options) []Command {
	if strings.IndexByte(body, '/') < 0 {
		return nil
	}
	body = strings.TrimPrefix(body, "\ufeff")
	if !mayHoldCommand(body) {
		return nil
	}
	return r.parseLines(paragraphLinesFull(body), opt)
}
