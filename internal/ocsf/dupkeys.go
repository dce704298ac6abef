package ocsf

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// CodeDuplicateKey marks a record in which an object names a member twice.
// Which of the two a reader sees depends on the reader, so such a record is
// ambiguous at best and, at worst, a way to show one value to a validator and
// another to whoever reads the stored record later.
const CodeDuplicateKey = "duplicate_key"

// linearNames is how many member names an object may have before lookups go
// through a hash index; below it a linear scan is cheaper than hashing.
const linearNames = 32

// dupFrame is one open container of the record being scanned.
type dupFrame struct {
	obj   bool
	start int    // this object's first name in dupScan.names
	key   []byte // the member being read (objects)
	index int    // the element being read (arrays)
	hash  map[uint64]int32
}

// dupScan finds duplicated member names at any depth of a valid JSON value.
// Its buffers are reused from record to record, so a scan allocates nothing
// once they have grown to the largest record's needs.
type dupScan struct {
	names  [][]byte
	frames []dupFrame
	hashes []map[uint64]int32 // spare indexes of objects already closed
	buf    []byte             // unescaped names
	seed   maphash.Seed
}

// find returns the JSON pointer of the first member whose name repeats an
// earlier member of the same object, and whether there is one. raw must be
// one valid JSON value.
func (d *dupScan) find(raw []byte) (string, bool) {
	if d.seed == (maphash.Seed{}) {
		d.seed = maphash.MakeSeed()
	}
	d.names, d.frames, d.buf = d.names[:0], d.frames[:0], d.buf[:0]
	expectKey := false
	for i := 0; i < len(raw); {
		switch raw[i] {
		case '{':
			d.frames = append(d.frames, dupFrame{obj: true, start: len(d.names)})
			expectKey = true
			i++
		case '[':
			d.frames = append(d.frames, dupFrame{})
			expectKey = false
			i++
		case '}', ']':
			top := &d.frames[len(d.frames)-1]
			if top.hash != nil {
				clear(top.hash)
				d.hashes = append(d.hashes, top.hash)
				top.hash = nil
			}
			if top.obj {
				d.names = d.names[:top.start]
			}
			d.frames = d.frames[:len(d.frames)-1]
			expectKey = false
			i++
		case ',':
			top := &d.frames[len(d.frames)-1]
			if top.obj {
				expectKey = true
			} else {
				top.index++
			}
			i++
		case '"':
			end := stringEnd(raw, i)
			if expectKey {
				expectKey = false
				if d.member(raw[i:end]) {
					return d.pointer(), true
				}
			}
			i = end
		default:
			// Numbers, literals, colons and whitespace: nothing to track.
			i++
			for i < len(raw) && !structural[raw[i]] {
				i++
			}
		}
	}
	return "", false
}

// structural marks the bytes dupScan.find acts on.
var structural = func() (t [256]bool) {
	for _, c := range []byte(`{}[],"`) {
		t[c] = true
	}
	return t
}()

// stringEnd returns the index just past the string starting at raw[i].
func stringEnd(raw []byte, i int) int {
	j := i + 1
	for {
		j += bytes.IndexByte(raw[j:], '"')
		// An odd run of backslashes escapes the quote; the opening quote
		// bounds the run.
		n := 0
		for raw[j-1-n] == '\\' {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}

// member records a name of the innermost object and reports whether the
// object already had it.
func (d *dupScan) member(quoted []byte) bool {
	name := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		// "a\u0062" and "ab" are the same name.
		start := len(d.buf)
		var err error
		if d.buf, err = jsontext.AppendUnquote(d.buf, quoted); err != nil {
			panic(err) // raw is valid JSON
		}
		name = d.buf[start:len(d.buf):len(d.buf)]
	}
	top := &d.frames[len(d.frames)-1]
	top.key = name
	have := d.names[top.start:]
	if top.hash == nil && len(have) < linearNames {
		for _, n := range have {
			if bytes.Equal(n, name) {
				return true
			}
		}
		d.names = append(d.names, name)
		return false
	}
	if top.hash == nil {
		top.hash = d.spareHash()
		for k, n := range have {
			top.hash[maphash.Bytes(d.seed, n)] = int32(top.start + k)
		}
	}
	h := maphash.Bytes(d.seed, name)
	if k, ok := top.hash[h]; ok {
		if bytes.Equal(d.names[k], name) {
			return true
		}
		// A hash collision between different names: settle it by reading.
		for _, n := range have {
			if bytes.Equal(n, name) {
				return true
			}
		}
	} else {
		top.hash[h] = int32(len(d.names))
	}
	d.names = append(d.names, name)
	return false
}

func (d *dupScan) spareHash() map[uint64]int32 {
	if n := len(d.hashes); n > 0 {
		m := d.hashes[n-1]
		d.hashes = d.hashes[:n-1]
		return m
	}
	return make(map[uint64]int32)
}

// pointer is the RFC 6901 pointer of the member being read.
func (d *dupScan) pointer() string {
	var b strings.Builder
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, f := range d.frames {
		b.WriteByte('/')
		if f.obj {
			b.WriteString(esc.Replace(string(f.key)))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}
