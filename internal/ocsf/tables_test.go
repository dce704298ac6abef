package ocsf

import (
	"slices"
	"testing"
)

func TestSeverity(t *testing.T) {
	tests := []struct {
		name    string
		label   string
		id      int64
		caption string
		sid     int64
		ok      bool
	}{
		{"agreeing pair", "High", 4, "high", 4, true},
		{"caption decides over the id", "Critical", 1, "critical", 5, true},
		{"caption decides, backwards the other way", "Informational", 5, "informational", 1, true},
		{"caption in any case and space", "  FATAL ", 2, "fatal", 6, true},
		{"caption over an id outside OCSF's", "Medium", 42, "medium", 3, true},
		{"other", "Other", 0, "other", 99, true},
		{"empty label: the id decides", "", 3, "medium", 3, true},
		{"vendor label: the id decides", "Severe", 4, "high", 4, true},
		{"a caption's prefix is not a caption", "crit", 2, "low", 2, true},
		{"neither is OCSF's", "Severe", 7, "severe", 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caption, sid, ok := Severity(tt.label, tt.id)
			if caption != tt.caption || sid != tt.sid || ok != tt.ok {
				t.Errorf("Severity(%q, %d) = %q, %d, %v; want %q, %d, %v", tt.label, tt.id, caption, sid, ok, tt.caption, tt.sid, tt.ok)
			}
		})
	}
}

// SeverityCaptions lists the table's captions in the order of their ids,
// which is what filters and docs show.
func TestSeverityCaptionsFollowTheIDs(t *testing.T) {
	var ids []int64
	for _, c := range SeverityCaptions {
		id, ok := severityID[c]
		if !ok {
			t.Fatalf("SeverityCaptions holds %q, which severityLabel does not", c)
		}
		ids = append(ids, id)
	}
	if len(ids) != len(severityLabel) || !slices.IsSorted(ids) {
		t.Fatalf("SeverityCaptions' ids %v: want each of severityLabel's %d ids once, ascending", ids, len(severityLabel))
	}
}
