package postgres

import (
	"encoding/binary"
	"io"
	"time"
)

// binaryCopy streams rows as the body of COPY ... FROM STDIN (FORMAT
// binary), one row encoded at a time. pgx's CopyFrom would do the same from
// a []any per row, boxing every value and looking up its encoder, which cost
// the worker about a sixth of its CPU time; here each column is written
// straight from the struct, and nothing is allocated per row.
//
// The column types must be the table's exactly (binary COPY does not
// convert): uuid, text, int4, timestamptz and bytea, in the order of the
// column list the rows are written for.
type binaryCopy struct {
	n      int
	encode func(w *binaryRow, i int)

	next    int
	done    bool
	row     binaryRow
	pending []byte // encoded and not yet read; the stream opens with the signature
}

func newBinaryCopy(n int, encode func(w *binaryRow, i int)) *binaryCopy {
	return &binaryCopy{n: n, encode: encode, pending: copySignature}
}

// copySignature opens every binary COPY stream: the signature, flags and
// header-extension length (both zero).
var copySignature = []byte("PGCOPY\n\377\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// Read fills p with as many rows as fit: pgconn sends what each Read
// returns as one message, with a system call of its own.
func (r *binaryCopy) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.pending) == 0 {
			switch {
			case r.done:
				if n > 0 {
					return n, nil
				}
				return 0, io.EOF
			case r.next < r.n:
				r.row.buf = r.row.buf[:0]
				r.encode(&r.row, r.next)
				r.next++
				r.pending = r.row.buf
			default:
				r.done = true
				r.pending = []byte{0xff, 0xff} // the trailer: a field count of -1
			}
		}
		c := copy(p[n:], r.pending)
		r.pending = r.pending[c:]
		n += c
	}
	return n, nil
}

// binaryRow encodes one row's fields in PostgreSQL's binary format.
type binaryRow struct{ buf []byte }

func (w *binaryRow) fields(n int) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(n)) }

func (w *binaryRow) text(s string) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *binaryRow) bytea(b []byte) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(b)))
	w.buf = append(w.buf, b...)
}

func (w *binaryRow) int4(v int32) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 4)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
}

func (w *binaryRow) uuid(id [16]byte) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 16)
	w.buf = append(w.buf, id[:]...)
}

// postgresEpochUnix is where timestamptz counts microseconds from:
// 2000-01-01T00:00:00Z, in Unix seconds.
const postgresEpochUnix = 946_684_800

func (w *binaryRow) timestamptz(t time.Time) {
	// Microseconds, truncated as pgx truncates; the engine has already cut
	// stored times to microseconds.
	us := (t.Unix()-postgresEpochUnix)*1_000_000 + int64(t.Nanosecond())/1000
	w.buf = binary.BigEndian.AppendUint32(w.buf, 8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(us))
}
