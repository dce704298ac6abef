// Package ocsf reads and validates OCSF Detection Finding reports: a JSON
// array of records with class_uid 2004.
//
// Whole-file syntax is checked by a hand-written incremental tokenizer rather
// than a general JSON decoder so that memory stays independent of the file
// size (Count holds no part of the file; Reader holds one
// record), every error carries an exact byte offset, and all entry points
// agree byte for byte on what a valid file is, whatever the read chunking.
//
// A valid file is RFC 8259 JSON whose top-level value is an array, with
// strings in valid UTF-8 and \u escapes whose surrogates pair up (what the
// Validator's strict decoder accepts), at most MaxDepth levels
// deep and no element larger than MaxRecordSize. A leading UTF-8 byte order
// mark is ignored. Elements of any JSON type count as records; that a record
// is not an object is the Validator's concern, not a file error.
package ocsf

import (
	"fmt"
)

// MaxRecordSize is the largest accepted record, in bytes of JSON text.
// Anything larger makes the whole file invalid: one record is the unit held
// in memory, so this is what bounds memory per reader.
const MaxRecordSize = 16 << 20

// MaxDepth is the deepest accepted nesting of arrays and objects, the
// top-level array included. Real findings nest a dozen levels; the bound
// keeps the tokenizer's stack small and stays well under the 10000-level limit
// of the JSON decoder the Validator uses.
const MaxDepth = 1000

// FileError is a whole-file problem (reject the upload with 400). Offset is
// the 0-based byte offset where it was detected: the offending byte, the
// file length for a truncated file, 0 for an empty one, and the record's
// first byte for an oversized record. Reason is the complete human sentence,
// offset included, so it can be shown to the uploader as is.
type FileError struct {
	Offset int64
	Reason string
	// Redacted is Reason without the bytes of the file it quotes (the
	// offending character, what a value looked like), or "" when Reason
	// quotes none.
	Redacted string
}

func (e *FileError) Error() string { return e.Reason }

// WithoutContent says where the problem is and what kind it is, and quotes
// nothing of the file: for a report whose readers may not read its source
// (a Secret's content must not reach an Ingestion's status, which view
// reads).
func (e *FileError) WithoutContent() string {
	if e.Redacted != "" {
		return e.Redacted
	}
	return e.Reason
}

type event uint8

const (
	evNone  event = iota
	evBegin       // a record started; its first byte was the last one consumed
	evEnd         // a record ended; its last byte was the last one consumed
	evErr
)

type state uint8

const (
	stStart state = iota
	stBOM1
	stBOM2
	stArrayFirst // after '[': a value or ']'
	stValue      // after ',' in an array or ':' in an object
	stObjFirst   // after '{': a key or '}'
	stObjKey     // after ',' in an object: a key
	stColon
	stAfter // after a value inside a container: ',' or the closing bracket
	stString
	stStrEsc
	stStrHex
	stStrUTF8
	stStrLowBackslash // a high surrogate escape must be followed by a low one
	stStrLowU
	stLit
	stNumMinus
	stNumZero
	stNumInt
	stNumDot
	stNumFrac
	stNumE
	stNumESign
	stNumExp
	stEnd
)

// plain marks string bytes that need no attention, so string bodies (the bulk
// of a report) are skipped by a tight loop.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// tokenizer is an incremental JSON syntax checker specialised to "one top-level
// array". It is fed arbitrary chunks and stops at record boundaries so that a
// caller can cut records out of its own buffer without re-scanning.
type tokenizer struct {
	pos   int64 // absolute offset of the next byte
	st    state
	stack []byte // open containers: '[' or '{'
	inKey bool

	hexN      int
	hexV      rune
	escStart  int64
	wantLow   bool
	highStart int64
	u8need    int
	u8lo      byte
	u8hi      byte
	u8start   int64
	lit       string
	litI      int

	count     int // records begun
	inElem    bool
	elemStart int64
	elemEnd   int64
	maxRecord int64

	err *FileError
}

func newTokenizer() *tokenizer {
	return &tokenizer{maxRecord: MaxRecordSize, stack: make([]byte, 0, 32)}
}

// step consumes bytes of buf until it is exhausted or something happened: a
// record began or ended, or an error. It returns the number of bytes
// consumed.
func (s *tokenizer) step(buf []byte) (int, event) {
	if s.err != nil {
		return 0, evErr
	}
	limit := len(buf)
	if s.inElem {
		// Never look past the first byte that would make the record too
		// large, so the verdict does not depend on how input is chunked.
		if room := s.elemStart + s.maxRecord + 1 - s.pos; int64(limit) > room {
			limit = int(room)
		}
	}
	base := s.pos
	i := 0
	ev := evNone
loop:
	for i < limit {
		c := buf[i]
		off := base + int64(i)
		switch s.st {
		case stString:
			for i < limit && plain[buf[i]] {
				i++
			}
			if i == limit {
				break loop
			}
			c = buf[i]
			off = base + int64(i)
			switch {
			case c == '"':
				if s.inKey {
					s.st = stColon
				} else if ev = s.valueDone(off + 1); ev != evNone {
					i++
					break loop
				}
			case c == '\\':
				s.escStart = off
				s.st = stStrEsc
			case c < 0x20:
				s.badChar(off, c, "in string literal (control characters must be escaped)", "")
				break loop
			default:
				if !s.utf8Start(c, off) {
					break loop
				}
			}
		case stStrUTF8:
			if c < s.u8lo || c > s.u8hi {
				s.fail(s.u8start, "invalid UTF-8 in string")
				break loop
			}
			s.u8lo, s.u8hi = 0x80, 0xBF
			if s.u8need--; s.u8need == 0 {
				s.st = stString
			}
		case stStrEsc:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.st = stString
			case 'u':
				s.hexN, s.hexV = 0, 0
				s.st = stStrHex
			default:
				s.badChar(off, c, "in string escape code", "")
				break loop
			}
		case stStrHex:
			var d byte
			switch {
			case c >= '0' && c <= '9':
				d = c - '0'
			case c >= 'a' && c <= 'f':
				d = c - 'a' + 10
			case c >= 'A' && c <= 'F':
				d = c - 'A' + 10
			default:
				s.badChar(off, c, "in \\u hexadecimal character escape", "")
				break loop
			}
			s.hexV = s.hexV<<4 | rune(d)
			if s.hexN++; s.hexN == 4 && !s.escapeDone() {
				break loop
			}
		case stStrLowBackslash:
			if c != '\\' {
				s.fail(s.highStart, "unpaired UTF-16 surrogate escape in string")
				break loop
			}
			s.escStart = off
			s.st = stStrLowU
		case stStrLowU:
			if c != 'u' {
				s.fail(s.highStart, "unpaired UTF-16 surrogate escape in string")
				break loop
			}
			s.hexN, s.hexV = 0, 0
			s.st = stStrHex
		case stAfter:
			if isSpace(c) {
				break
			}
			top := s.stack[len(s.stack)-1]
			switch {
			case c == ',' && top == '[':
				s.st = stValue
			case c == ',':
				s.st = stObjKey
			case c == ']' && top == '[', c == '}' && top == '{':
				if ev = s.close(off); ev != evNone {
					i++
					break loop
				}
			case top == '[':
				s.badChar(off, c, "after array element", "")
				break loop
			default:
				s.badChar(off, c, "after object key:value pair", "")
				break loop
			}
		case stValue, stArrayFirst:
			if isSpace(c) {
				break
			}
			if c == ']' && s.st == stArrayFirst {
				if ev = s.close(off); ev != evNone {
					i++
					break loop
				}
				break
			}
			if ev = s.beginValue(c, off); ev != evNone {
				i++
				break loop
			}
		case stObjFirst, stObjKey:
			switch {
			case isSpace(c):
			case c == '"':
				s.inKey = true
				s.st = stString
			case c == '}' && s.st == stObjFirst:
				if ev = s.close(off); ev != evNone {
					i++
					break loop
				}
			default:
				s.badChar(off, c, "looking for beginning of object key string", "")
				break loop
			}
		case stColon:
			switch {
			case isSpace(c):
			case c == ':':
				s.st = stValue
			default:
				s.badChar(off, c, "after object key", "")
				break loop
			}
		case stLit:
			if c != s.lit[s.litI] {
				s.badChar(off, c, fmt.Sprintf("in literal %s (expecting %s)", s.lit, quoteChar(s.lit[s.litI])), "in a literal (true, false or null)")
				break loop
			}
			if s.litI++; s.litI == len(s.lit) {
				if ev = s.valueDone(off + 1); ev != evNone {
					i++
					break loop
				}
			}
		case stNumMinus:
			switch {
			case c == '0':
				s.st = stNumZero
			case c >= '1' && c <= '9':
				s.st = stNumInt
			default:
				s.badChar(off, c, "in numeric literal", "")
				break loop
			}
		case stNumInt:
			for i < limit && buf[i] >= '0' && buf[i] <= '9' {
				i++
			}
			if i == limit {
				break loop
			}
			c = buf[i]
			off = base + int64(i)
			fallthrough
		case stNumZero:
			switch c {
			case '.':
				s.st = stNumDot
			case 'e', 'E':
				s.st = stNumE
			default:
				// The byte after a number is not part of it: finish the
				// number without consuming, then look at the byte again.
				if ev = s.valueDone(off); ev != evNone {
					break loop
				}
				continue
			}
		case stNumDot:
			if c < '0' || c > '9' {
				s.badChar(off, c, "after decimal point in numeric literal", "")
				break loop
			}
			s.st = stNumFrac
		case stNumFrac:
			for i < limit && buf[i] >= '0' && buf[i] <= '9' {
				i++
			}
			if i == limit {
				break loop
			}
			c = buf[i]
			off = base + int64(i)
			if c == 'e' || c == 'E' {
				s.st = stNumE
				break
			}
			if ev = s.valueDone(off); ev != evNone {
				break loop
			}
			continue
		case stNumE:
			switch {
			case c == '+' || c == '-':
				s.st = stNumESign
			case c >= '0' && c <= '9':
				s.st = stNumExp
			default:
				s.badChar(off, c, "in exponent of numeric literal", "")
				break loop
			}
		case stNumESign:
			if c < '0' || c > '9' {
				s.badChar(off, c, "in exponent of numeric literal", "")
				break loop
			}
			s.st = stNumExp
		case stNumExp:
			for i < limit && buf[i] >= '0' && buf[i] <= '9' {
				i++
			}
			if i == limit {
				break loop
			}
			if ev = s.valueDone(base + int64(i)); ev != evNone {
				break loop
			}
			continue
		case stStart:
			switch {
			case isSpace(c):
			case c == 0xEF && off == 0:
				// Tolerate a UTF-8 byte order mark: Windows editors and
				// PowerShell write one and it carries no meaning.
				s.st = stBOM1
			case c == '[':
				s.stack = append(s.stack, '[')
				s.st = stArrayFirst
			default:
				s.notArray(c, off)
				break loop
			}
		case stBOM1, stBOM2:
			want := byte(0xBB)
			if s.st == stBOM2 {
				want = 0xBF
			}
			if c != want {
				s.badChar(0, 0xEF, "looking for beginning of value", "")
				break loop
			}
			if s.st == stBOM1 {
				s.st = stBOM2
			} else {
				s.st = stStart
			}
		case stEnd:
			if !isSpace(c) {
				s.err = &FileError{Offset: off, Reason: fmt.Sprintf("unexpected data at byte %d after the end of the top-level array", off)}
				break loop
			}
		}
		i++
	}
	s.pos = base + int64(i)
	if s.err != nil {
		return i, evErr
	}
	if ev == evNone && s.inElem && s.pos-s.elemStart > s.maxRecord {
		s.tooLarge()
		return i, evErr
	}
	return i, ev
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func (s *tokenizer) beginValue(c byte, off int64) event {
	ev := evNone
	if len(s.stack) == 1 {
		s.count++
		s.inElem = true
		s.elemStart = off
		ev = evBegin
	}
	switch {
	case c == '{' || c == '[':
		if len(s.stack) >= MaxDepth {
			s.fail(off, "nesting deeper than %d levels", MaxDepth)
			return evErr
		}
		s.stack = append(s.stack, c)
		if c == '{' {
			s.st = stObjFirst
		} else {
			s.st = stArrayFirst
		}
	case c == '"':
		s.inKey = false
		s.st = stString
	case c == '-':
		s.st = stNumMinus
	case c == '0':
		s.st = stNumZero
	case c >= '1' && c <= '9':
		s.st = stNumInt
	case c == 't':
		s.lit, s.litI, s.st = "true", 1, stLit
	case c == 'f':
		s.lit, s.litI, s.st = "false", 1, stLit
	case c == 'n':
		s.lit, s.litI, s.st = "null", 1, stLit
	default:
		if ev == evBegin {
			// The byte does not start a value, so no record began.
			s.count--
			s.inElem = false
		}
		s.badChar(off, c, "looking for beginning of value", "")
		return evErr
	}
	return ev
}

// valueDone is called when a value ends; end is the offset just past it.
func (s *tokenizer) valueDone(end int64) event {
	s.st = stAfter
	if len(s.stack) != 1 || !s.inElem {
		return evNone
	}
	s.inElem = false
	s.elemEnd = end
	if end-s.elemStart > s.maxRecord {
		s.tooLarge()
		return evErr
	}
	return evEnd
}

func (s *tokenizer) close(off int64) event {
	s.stack = s.stack[:len(s.stack)-1]
	if len(s.stack) == 0 {
		s.st = stEnd
		return evNone
	}
	return s.valueDone(off + 1)
}

// escapeDone validates a completed \uXXXX escape. Surrogates must pair up
// because the Validator's decoder, and PostgreSQL jsonb, reject lone ones.
func (s *tokenizer) escapeDone() bool {
	v := s.hexV
	switch {
	case s.wantLow:
		s.wantLow = false
		if v < 0xDC00 || v > 0xDFFF {
			s.fail(s.highStart, "unpaired UTF-16 surrogate escape in string")
			return false
		}
	case v >= 0xD800 && v <= 0xDBFF:
		s.wantLow = true
		s.highStart = s.escStart
		s.st = stStrLowBackslash
		return true
	case v >= 0xDC00 && v <= 0xDFFF:
		s.fail(s.escStart, "unpaired UTF-16 surrogate escape in string")
		return false
	}
	s.st = stString
	return true
}

// utf8Start checks the lead byte of a multi-byte sequence. The ranges are
// those of utf8.Valid, so overlong forms and encoded surrogates are refused
// exactly as the Validator's decoder would refuse them.
func (s *tokenizer) utf8Start(c byte, off int64) bool {
	s.u8start = off
	s.u8lo, s.u8hi = 0x80, 0xBF
	switch {
	case c >= 0xC2 && c <= 0xDF:
		s.u8need = 1
	case c == 0xE0:
		s.u8need, s.u8lo = 2, 0xA0
	case c == 0xED:
		s.u8need, s.u8hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		s.u8need = 2
	case c == 0xF0:
		s.u8need, s.u8lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		s.u8need = 3
	case c == 0xF4:
		s.u8need, s.u8hi = 3, 0x8F
	default:
		s.fail(off, "invalid UTF-8 in string")
		return false
	}
	s.st = stStrUTF8
	return true
}

// fail is a problem whose message quotes nothing of the file.
func (s *tokenizer) fail(off int64, format string, args ...any) {
	reason := fmt.Sprintf("malformed JSON at byte %d: %s", off, fmt.Sprintf(format, args...))
	s.err = &FileError{Offset: off, Reason: reason + s.where()}
}

// badChar is an unexpected byte c at off, where says in what. The message
// quotes c; its redacted form does not, nor where when redactedWhere is
// set (a literal's name tells its first letter).
func (s *tokenizer) badChar(off int64, c byte, where, redactedWhere string) {
	if redactedWhere == "" {
		redactedWhere = where
	}
	s.err = &FileError{
		Offset:   off,
		Reason:   fmt.Sprintf("malformed JSON at byte %d: invalid character %s %s", off, quoteChar(c), where) + s.where(),
		Redacted: fmt.Sprintf("malformed JSON at byte %d: unexpected character %s", off, redactedWhere) + s.where(),
	}
}

// where names the record being read, which is what a user searching a large
// report for the problem actually needs.
func (s *tokenizer) where() string {
	if !s.inElem {
		return ""
	}
	return fmt.Sprintf(" (in record %d, which starts at byte %d)", s.count-1, s.elemStart)
}

func (s *tokenizer) tooLarge() {
	s.err = &FileError{Offset: s.elemStart, Reason: fmt.Sprintf(
		"record %d at byte %d is larger than the %d MiB limit", s.count-1, s.elemStart, s.maxRecord>>20)}
	if s.maxRecord < 1<<20 {
		s.err.Reason = fmt.Sprintf("record %d at byte %d is larger than the %d-byte limit", s.count-1, s.elemStart, s.maxRecord)
	}
}

func (s *tokenizer) notArray(c byte, off int64) {
	var found string
	switch {
	case c == '{':
		found = "an object"
	case c == '"':
		found = "a string"
	case c == '-' || c >= '0' && c <= '9':
		found = "a number"
	case c == 't' || c == 'f':
		found = "a boolean"
	case c == 'n':
		found = "null"
	default:
		found = "invalid character " + quoteChar(c)
	}
	s.err = &FileError{Offset: off, Reason: fmt.Sprintf("expected a JSON array at byte %d, found %s", off, found),
		Redacted: fmt.Sprintf("expected a JSON array at byte %d", off)}
}

// finish is called at end of input and gives the number of records.
func (s *tokenizer) finish() (int, *FileError) {
	if s.err != nil {
		return 0, s.err
	}
	switch s.st {
	case stEnd:
		return s.count, nil
	case stStart:
		s.err = &FileError{Offset: 0, Reason: "empty file"}
	default:
		s.err = &FileError{Offset: s.pos, Reason: fmt.Sprintf(
			"unexpected end of file at byte %d (truncated JSON)", s.pos) + s.where()}
	}
	return 0, s.err
}

// feed tokenizes a whole chunk, ignoring record boundaries.
func (s *tokenizer) feed(buf []byte) *FileError {
	for len(buf) > 0 {
		n, ev := s.step(buf)
		if ev == evErr {
			return s.err
		}
		buf = buf[n:]
	}
	return nil
}

func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c >= 0x20 && c < 0x7F:
		return "'" + string(c) + "'"
	default:
		return fmt.Sprintf("0x%02X", c)
	}
}
