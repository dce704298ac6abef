package postgres

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// The COPY stream must not depend on how it is read: pgconn reads 64 KiB at
// a time, rows are a few KiB, and a row may be larger than the buffer.
func TestBinaryCopyStream(t *testing.T) {
	rows := []string{"", "short", strings.Repeat("x", 3000), strings.Repeat("y", 200_000)}
	at := time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	stream := func() io.Reader {
		return newBinaryCopy(len(rows), func(w *binaryRow, i int) {
			w.fields(5)
			w.uuid([16]byte{byte(i)})
			w.text(rows[i])
			w.int4(int32(-i))
			w.timestamptz(at)
			w.bytea([]byte(rows[i]))
		})
	}
	want, err := io.ReadAll(iotest.OneByteReader(stream()))
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]io.Reader{
		"growing reads": stream(),
		"half reads":    iotest.HalfReader(stream()),
	} {
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want the %d bytes of one-byte reads", name, len(got), err, len(want))
		}
	}
	if err := iotest.TestReader(stream(), want); err != nil {
		t.Error(err)
	}

	// The frame: signature, flags, header extension, rows, trailer.
	if !bytes.HasPrefix(want, []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")) || !bytes.HasSuffix(want, []byte{0xff, 0xff}) {
		t.Errorf("not a binary COPY frame: % x ... % x", want[:19], want[len(want)-2:])
	}
	// One microsecond before PostgreSQL's epoch.
	if !bytes.Contains(want, []byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) {
		t.Error("timestamptz of 1999-12-31T23:59:59.999999Z is not -1 µs")
	}
}
