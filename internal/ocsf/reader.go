package ocsf

import (
	"io"
)

// chunkSize is the read size. Big enough that syscalls and per-call overhead
// vanish next to scanning, small enough to be irrelevant next to a record.
const chunkSize = 64 << 10

// Count reads a whole report and returns the number of top-level array
// elements. It checks that the whole input is syntactically valid JSON and a
// top-level array; otherwise it returns a *FileError. Other errors are the
// reader's own. Memory use is constant: no record is buffered.
func Count(r io.Reader) (int, error) {
	s := newTokenizer()
	buf := make([]byte, chunkSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if ferr := s.feed(buf[:n]); ferr != nil {
				return 0, ferr
			}
		}
		if err == io.EOF {
			count, ferr := s.finish()
			if ferr != nil {
				return 0, ferr
			}
			return count, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// Record is one element of the report's top-level array.
type Record struct {
	Index  int   // 0-based position in the array
	Offset int64 // byte offset of the record's first byte in the file
	// Raw is the record's exact JSON bytes: from Next, a fresh copy the
	// caller may keep (but not modify); from NextBorrowed, valid until the
	// Reader's next call.
	Raw []byte

	// checked says Raw came from a Reader, so it is known to be one valid
	// JSON value and the Validator need not check its syntax again.
	checked bool
}

// Reader yields records one at a time. It holds one record plus a fixed
// read buffer, whatever the size of the report.
type Reader struct {
	src io.Reader
	s   *tokenizer
	buf []byte
	// buf[start:end] is read and not yet scanned.
	start, end int
	// While the tokenizer is inside a record, the record starts at
	// buf[recStart] or, when it began in an earlier read, in acc, which holds
	// its bytes up to the current buffer.
	recStart int
	acc      []byte
	eof      bool
	readErr  error
	err      error
}

// NewReader returns a Reader over a report.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r, s: newTokenizer()}
}

// Next returns the next record, io.EOF after the last one, or a *FileError
// when the report is malformed (including trailing data after the array:
// io.EOF is only returned once the whole input has been checked). Errors
// from the underlying reader are returned as they are. After an error,
// Next keeps returning it.
func (r *Reader) Next() (Record, error) {
	rec, err := r.NextBorrowed()
	if err == nil {
		rec.Raw = append([]byte(nil), rec.Raw...)
	}
	return rec, err
}

// NextBorrowed is Next without the copy: the record's Raw points into the
// Reader's buffers and is only valid until the next call. It is for callers
// that copy records to memory of their own anyway.
func (r *Reader) NextBorrowed() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	if r.buf == nil {
		r.buf = make([]byte, chunkSize)
	}
	for {
		if r.start == r.end {
			if r.readErr != nil {
				r.err = r.readErr
				return Record{}, r.err
			}
			if r.eof {
				if _, ferr := r.s.finish(); ferr != nil {
					r.err = ferr
				} else {
					r.err = io.EOF
				}
				return Record{}, r.err
			}
			if r.s.inElem {
				// The buffer is about to be overwritten: keep what it holds
				// of the record.
				r.acc = append(r.acc, r.buf[r.recStart:r.end]...)
				r.recStart = 0
			}
			n, err := r.src.Read(r.buf)
			r.start, r.end = 0, n
			if err == io.EOF {
				r.eof = true
			} else if err != nil {
				r.readErr = err
			}
			continue
		}
		n, ev := r.s.step(r.buf[r.start:r.end])
		r.start += n
		switch ev {
		case evErr:
			r.err = r.s.err
			r.acc = nil
			return Record{}, r.err
		case evBegin:
			r.recStart, r.acc = r.start-1, r.acc[:0]
		case evEnd:
			raw := r.buf[r.recStart:r.start]
			if len(r.acc) > 0 {
				r.acc = append(r.acc, raw...)
				raw = r.acc
			}
			// Drop a buffer grown by an unusually large record rather than
			// pinning up to MaxRecordSize for the rest of the file; the
			// record keeps it alive until the caller is done with it.
			if cap(r.acc) > 4*chunkSize {
				r.acc = nil
			}
			return Record{Index: r.s.count - 1, Offset: r.s.elemStart, Raw: raw, checked: true}, nil
		}
	}
}
