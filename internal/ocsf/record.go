package ocsf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Reading a record: the few fields the rules look at are captured as jvals
// by a cursor that skips everything else undecoded.

// jval is a captured JSON value at a path the validator cares about.
type jval struct {
	set  bool
	kind jsontext.Kind
	str  string // decoded string, or the raw text of a number or literal
	show string // compact, truncated text of an object or array
}

func (j jval) missing() bool { return !j.set || j.kind == 'n' }

func (j jval) isStr() bool { return j.set && j.kind == '"' }

// text returns the string value, or "" when the value is not a string.
func (j jval) text() string {
	if j.kind == '"' {
		return j.str
	}
	return ""
}

func (j jval) display() string {
	switch {
	case !j.set:
		return ""
	case j.kind == '"':
		return ValueText(j.str)
	case j.kind == '{' || j.kind == '[':
		return j.show
	default:
		return truncate(j.str, MaxValueLength)
	}
}

// ValueText shows a string as a Problem's Value does: as JSON text, quotes
// included, cut to at most MaxValueLength characters.
func ValueText(str string) string {
	s := truncate(str, MaxValueLength+1)
	q, err := jsontext.AppendQuote(nil, s)
	if err != nil {
		return truncate(strconv.Quote(s), MaxValueLength)
	}
	return truncate(string(q), MaxValueLength)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "an invalid value"
}

// fields holds what the validator reads from one record. Everything else is
// skipped without being decoded, which is what keeps Check fast.
type fields struct {
	classUID, activityID, categoryUID, typeUID, time, severityID jval
	severity, status, statusCode                                 jval

	metadata jval
	md       struct{ version, eventCode, product, prodName, prodUID jval }

	findingInfo jval
	fi          struct{ uid, title jval }

	cloud jval
	cl    struct{ provider, region, account, accountUID, accountName jval }

	unmapped jval
	um       struct{ provider, providerUID, scanID jval }

	resRegion, resUID string
}

var errNotObject = errors.New("not an object")

// parse reads the fields of interest and skips the rest undecoded. A
// record from a Reader is already known to be one valid JSON value, so it is
// walked by a cursor that skips values by their structure alone; any other
// record is first checked with a strict decoder.
func (v *Validator) parse(rec Record, f *fields, root *jval) (err error) {
	if !rec.checked {
		if err := v.syntax(rec.Raw); err != nil {
			return err
		}
	}
	c := cursor{b: rec.Raw}
	defer func() {
		// The cursor trusts its input; should that trust ever be misplaced,
		// the record is reported as broken instead of taking the worker down.
		if r := recover(); r != nil {
			err = fmt.Errorf("unexpected structure at byte %d", c.i)
		}
	}()
	if c.peek() != '{' {
		c.val(root)
		return errNotObject
	}
	c.object(func(name []byte) {
		switch string(name) {
		case "class_uid":
			c.val(&f.classUID)
		case "activity_id":
			c.val(&f.activityID)
		case "category_uid":
			c.val(&f.categoryUID)
		case "type_uid":
			c.val(&f.typeUID)
		case "time":
			c.val(&f.time)
		case "severity_id":
			c.val(&f.severityID)
		case "severity":
			c.val(&f.severity)
		case "status":
			c.val(&f.status)
		case "status_code":
			c.val(&f.statusCode)
		case "metadata":
			md := &f.md
			*md = struct{ version, eventCode, product, prodName, prodUID jval }{}
			c.objectOr(&f.metadata, func(name []byte) {
				switch string(name) {
				case "version":
					c.val(&md.version)
				case "event_code":
					c.val(&md.eventCode)
				case "product":
					md.prodName, md.prodUID = jval{}, jval{}
					c.objectOr(&md.product, func(name []byte) {
						switch string(name) {
						case "name":
							c.val(&md.prodName)
						case "uid":
							c.val(&md.prodUID)
						default:
							c.skip()
						}
					})
				default:
					c.skip()
				}
			})
		case "finding_info":
			fi := &f.fi
			fi.uid, fi.title = jval{}, jval{}
			c.objectOr(&f.findingInfo, func(name []byte) {
				switch string(name) {
				case "uid":
					c.val(&fi.uid)
				case "title":
					c.val(&fi.title)
				default:
					c.skip()
				}
			})
		case "cloud":
			cl := &f.cl
			*cl = struct{ provider, region, account, accountUID, accountName jval }{}
			c.objectOr(&f.cloud, func(name []byte) {
				switch string(name) {
				case "provider":
					c.val(&cl.provider)
				case "region":
					c.val(&cl.region)
				case "account":
					cl.accountUID, cl.accountName = jval{}, jval{}
					c.objectOr(&cl.account, func(name []byte) {
						switch string(name) {
						case "uid":
							c.val(&cl.accountUID)
						case "name":
							c.val(&cl.accountName)
						default:
							c.skip()
						}
					})
				default:
					c.skip()
				}
			})
		case "unmapped":
			um := &f.um
			*um = struct{ provider, providerUID, scanID jval }{}
			c.objectOr(&f.unmapped, func(name []byte) {
				switch string(name) {
				case "provider":
					c.val(&um.provider)
				case "provider_uid":
					c.val(&um.providerUID)
				case "scan_id":
					c.val(&um.scanID)
				default:
					c.skip()
				}
			})
		case "resources":
			f.resRegion, f.resUID = "", ""
			c.resources(f)
		default:
			c.skip()
		}
	})
	return nil
}

// syntax checks that raw is exactly one valid JSON value, with the same
// strictness as the tokenizer (UTF-8, paired surrogates).
func (v *Validator) syntax(raw []byte) error {
	d := v.dec
	// A bytes.Buffer lets the decoder parse in place instead of copying.
	d.Reset(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true))
	if err := d.SkipValue(); err != nil {
		return err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		if err == nil {
			return errors.New("unexpected data after the record")
		}
		return err
	}
	return nil
}

// cursor walks one valid JSON value. Strings, the bulk of a record, are
// skipped by searching for their closing quote, so skipping costs little
// more than a memchr over the bytes.
type cursor struct {
	b []byte
	i int
}

// peek skips whitespace and returns the next byte.
func (c *cursor) peek() byte {
	for isSpace(c.b[c.i]) {
		c.i++
	}
	return c.b[c.i]
}

// str consumes the string at the cursor and returns it with its quotes.
func (c *cursor) str() []byte {
	start := c.i
	j := c.i + 1
	for {
		k := bytes.IndexByte(c.b[j:], '"')
		if k < 0 {
			panic("unterminated string")
		}
		j += k
		// The quote ends the string unless an odd run of backslashes
		// escapes it; the opening quote bounds the run.
		n := 0
		for c.b[j-1-n] == '\\' {
			n++
		}
		j++
		if n%2 == 0 {
			break
		}
	}
	c.i = j
	return c.b[start:j]
}

// skip consumes the value at the cursor.
func (c *cursor) skip() {
	switch c.peek() {
	case '"':
		c.str()
	case '{', '[':
		depth := 0
		for {
			switch c.b[c.i] {
			case '"':
				c.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					c.i++
					return
				}
			}
			c.i++
		}
	default: // a number or a literal
		for c.i < len(c.b) && !isDelim(c.b[c.i]) {
			c.i++
		}
	}
}

func isDelim(b byte) bool { return b == ',' || b == '}' || b == ']' || isSpace(b) }

// object consumes an object, calling fn with each member name (unescaped);
// fn must consume the member's value.
func (c *cursor) object(fn func(name []byte)) {
	c.peek() // '{'
	c.i++
	for {
		switch c.peek() {
		case '}':
			c.i++
			return
		case ',':
			c.i++
			c.peek()
		}
		raw := c.str()
		name := raw[1 : len(raw)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var err error
			if name, err = jsontext.AppendUnquote(nil, raw); err != nil {
				panic(err)
			}
		}
		c.peek() // ':'
		c.i++
		fn(name)
	}
}

// objectOr descends into an object, or captures a value of another kind in
// dst so it can be reported as having the wrong type.
func (c *cursor) objectOr(dst *jval, fn func(name []byte)) {
	if c.peek() == '{' {
		*dst = jval{set: true, kind: '{'}
		c.object(fn)
		return
	}
	c.val(dst)
}

// resources takes the first non-empty region and uid among resources[].
func (c *cursor) resources(f *fields) {
	if c.peek() != '[' {
		c.skip()
		return
	}
	c.i++
	for {
		switch c.peek() {
		case ']':
			c.i++
			return
		case ',':
			c.i++
		}
		if c.peek() != '{' {
			c.skip()
			continue
		}
		var region, uid jval
		c.object(func(name []byte) {
			switch string(name) {
			case "region":
				c.val(&region)
			case "uid":
				c.val(&uid)
			default:
				c.skip()
			}
		})
		if f.resRegion == "" {
			f.resRegion = region.text()
		}
		if f.resUID == "" {
			f.resUID = uid.text()
		}
	}
}

// val captures the value at the cursor.
func (c *cursor) val(dst *jval) {
	c.peek()
	start := c.i
	c.skip()
	raw := c.b[start:c.i]
	*dst = jval{set: true, kind: kindOf(raw[0])}
	switch dst.kind {
	case '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			dst.str = string(raw[1 : len(raw)-1])
		} else {
			b, err := jsontext.AppendUnquote(nil, raw)
			if err != nil {
				panic(err)
			}
			dst.str = string(b)
		}
	case '{', '[':
		v := jsontext.Value(bytes.Clone(raw))
		if err := v.Compact(); err != nil {
			panic(err)
		}
		dst.show = truncate(string(v), MaxValueLength)
	default:
		dst.str = string(raw)
	}
}

// kindOf is the jsontext.Kind of a value starting with b.
func kindOf(b byte) jsontext.Kind {
	switch b {
	case '"', '{', '[', 't', 'f', 'n':
		return jsontext.Kind(b)
	}
	return '0'
}

// truncate cuts s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n-1 {
			if utf8.RuneCountInString(s[i:]) <= 1 {
				return s
			}
			return s[:i] + "…"
		}
		count++
	}
	return s
}
