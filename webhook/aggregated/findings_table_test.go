package aggregated

import (
	"context"
	"testing"
	"time"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	"github.com/posture-dev/posture/internal/store"
)

// TestFindingTableDelta: the current state's delta and first-seen time
// reach kubectl's table, and a history row (neither set) leaves both
// cells empty.
func TestFindingTableDelta(t *testing.T) {
	seen := time.Now().Add(-3 * time.Hour)
	cols := map[string]int{}
	for i, c := range findingColumns {
		cols[c.Name] = i
	}
	for _, tc := range []struct {
		name             string
		row              store.Finding
		delta, firstSeen string
	}{
		{"new in the current state", store.Finding{ID: "f1", Delta: "new", FirstSeenAt: &seen}, "new", "3h"},
		{"changed in the current state", store.Finding{ID: "f2", Delta: "changed", FirstSeenAt: &seen}, "changed", "3h"},
		{"history", store.Finding{ID: "f3"}, "", ""},
		{"muted", store.Finding{ID: "f4", Mute: &store.MuteMark{Rule: "accepted", Reason: "by design"}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := toFinding(&tc.row, "tenant-a")
			if (tc.row.FirstSeenAt == nil) != (f.FirstSeenAt == nil) {
				t.Errorf("firstSeenAt %v from the store's %v", f.FirstSeenAt, tc.row.FirstSeenAt)
			}
			table, err := (&findingStorage{}).ConvertToTable(context.Background(), &datav1.FindingList{Items: []datav1.Finding{*f}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cells := table.Rows[0].Cells
			if got := cells[cols["Delta"]]; got != tc.delta {
				t.Errorf("DELTA cell %q, want %q", got, tc.delta)
			}
			if got := cells[cols["First Seen"]]; got != tc.firstSeen {
				t.Errorf("FIRST SEEN cell %q, want %q", got, tc.firstSeen)
			}
			rule, reason := "", ""
			if tc.row.Mute != nil {
				rule, reason = tc.row.Mute.Rule, tc.row.Mute.Reason
			}
			if got := cells[cols["Muted"]]; got != rule || cells[cols["Mute Reason"]] != reason || f.Muted != (rule != "") || f.MuteReason != reason {
				t.Errorf("MUTED cell %q, MUTE REASON %q, muted %v; want %q, %q", got, cells[cols["Mute Reason"]], f.Muted, rule, reason)
			}
			if len(cells) != len(findingColumns) {
				t.Errorf("%d cells for %d columns", len(cells), len(findingColumns))
			}
		})
	}
}
