package billing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/ocsf"
)

// TestReadAhead: records read a batch ahead are the Reader's own, whatever
// their sizes (one larger than a batch among them), and so is its verdict
// at the end.
func TestReadAhead(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 3000 {
		if i > 0 {
			b.WriteString(",")
		}
		pad := strings.Repeat("x", i%700)
		if i == 1234 {
			pad = strings.Repeat("y", 3*readAheadBytes)
		}
		fmt.Fprintf(&b, `{"n":%d,"pad":%q}`, i, pad)
	}
	whole := b.String() + "]"
	for _, tc := range []struct {
		name, report string
	}{
		{"a valid report", whole},
		{"trailing bytes after the array", whole + " x"},
		{"cut short", whole[:len(whole)/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ocsf.NewReader(strings.NewReader(tc.report))
			ra := newReadAhead(ocsf.NewReader(strings.NewReader(tc.report)))
			defer ra.stop()
			for i := 0; ; i++ {
				w, werr := want.NextBorrowed()
				g, gerr := ra.next()
				if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
					t.Fatalf("record %d: read ahead %v, the Reader %v", i, gerr, werr)
				}
				if werr != nil {
					if !errors.Is(werr, io.EOF) {
						var fe *ocsf.FileError
						if !errors.As(gerr, &fe) {
							t.Fatalf("read ahead ended with %T, want *ocsf.FileError", gerr)
						}
					}
					return
				}
				if g.Index != w.Index || g.Offset != w.Offset || !bytes.Equal(g.Raw, w.Raw) {
					t.Fatalf("record %d: read ahead (%d at %d, %d bytes) differs from the Reader's (%d at %d, %d bytes)",
						i, g.Index, g.Offset, len(g.Raw), w.Index, w.Offset, len(w.Raw))
				}
			}
		})
	}
}
