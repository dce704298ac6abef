// Package termsafe is the one rule for text from reports and requests that
// ends up on a terminal: in a table cell that kubectl, kubectl-posture or
// postctl prints, in an event, or in a file name. Reports are written by
// whoever runs a scanner, and a check id or resource uid holding
// "ESC ] 0;title BEL" retitles the window of everyone who lists findings;
// OSC 52 writes the clipboard in some terminals, and a bidi override makes a
// line read in an order other than the bytes it holds.
package termsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r acts on a terminal rather than being shown: C0
// (tab and newline too, which break a table's columns and rows), DEL, C1, the
// line and paragraph separators, and the bidirectional formatting
// characters (marks, embeddings, overrides and isolates).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, // ARABIC LETTER MARK
		r == 0x200e, r == 0x200f, // LEFT-TO-RIGHT MARK, RIGHT-TO-LEFT MARK
		r >= 0x2028 && r <= 0x202e, // LINE/PARAGRAPH SEPARATOR, LRE, RLE, PDF, LRO, RLO
		r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	}
	return false
}

// Find gives the first unsafe character of s and its byte offset, or -1.
// A byte that is not UTF-8 counts as unsafe: a lone 0x9b is CSI to a
// terminal in 8-bit mode. It is reported as utf8.RuneError.
func Find(s string) (rune, int) {
	for i, r := range s {
		if Unsafe(r) {
			return r, i
		}
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return r, i
			}
		}
	}
	return 0, -1
}

// String shows s with every unsafe character as a visible escape (\x1b,
// \u202e) and every byte that is not UTF-8 as \xNN, so what a report holds
// can still be read, but never acts on the terminal. Text with nothing to
// escape is returned as is.
func String(s string) string {
	if _, i := Find(s); i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case Unsafe(r) && r < 0x80:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case Unsafe(r):
			b.WriteString(`\u`)
			q := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(q)))
			b.WriteString(q)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
