package export

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

func TestCell(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"=1+1", "'=1+1"},
		{"+49 30", "'+49 30"},
		{"-2", "'-2"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"},
		{"\rx", "'\rx"},
		{"a=b", "a=b"},
		{"'quoted", "'quoted"},
	} {
		if got := Cell(tc.in); got != tc.want {
			t.Errorf("Cell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A file is whole only once closed: an empty export is still a file, and
// the current state's rows have its two columns more.
func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		format  Format
		current bool
		rows    int
		want    string
	}{
		{OCSF, false, 0, "[]\n"},
		{OCSF, false, 2, "[\n{\"a\":1}\n,\n{\"a\":1}\n\n]\n"},
		{CSV, false, 0, ""},
	} {
		var buf bytes.Buffer
		x := NewWriter(&buf, tc.format, tc.current)
		for range tc.rows {
			if err := x.Write(&store.Finding{ID: "f", UID: "u", Raw: []byte("{\"a\":1}\n")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if tc.format == OCSF && buf.String() != tc.want {
			t.Errorf("%s of %d: %q, want %q", tc.format, tc.rows, buf.String(), tc.want)
		}
		if tc.format == CSV {
			rows, err := csv.NewReader(&buf).ReadAll()
			if err != nil || len(rows) != 1 || len(rows[0]) != len(Columns) {
				t.Errorf("empty CSV: %q, %v", rows, err)
			}
		}
	}
	var buf bytes.Buffer
	x := NewWriter(&buf, CSV, true)
	seen := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	if err := x.Write(&store.Finding{ID: "f", FirstSeenAt: &seen, Delta: "new"}); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 2 || len(rows[1]) != len(CurrentColumns) ||
		rows[1][len(CurrentColumns)-2] != "2026-01-02T03:04:05Z" || rows[1][len(CurrentColumns)-1] != "new" {
		t.Fatalf("current state CSV: %q, %v", rows, err)
	}
	if err := NewWriter(&buf, OCSF, false).Write(&store.Finding{ID: "f"}); err == nil {
		t.Error("an OCSF export wrote a finding without a record")
	}
}
