package aggregated

import (
	"context"
	"fmt"
	"testing"
	"time"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	"github.com/posture-dev/posture/internal/ingestions"
	"github.com/posture-dev/posture/internal/store"
)

// TestScanTable: what failed, when the scanner ran and the report reach the
// scan and kubectl's table; a scan without findings yet or whose Ingestion
// is gone leaves them absent (empty cells, an unknown age), never made up.
func TestScanTable(t *testing.T) {
	scanned := time.Now().Add(-26 * time.Hour)
	cols := map[string]int{}
	for i, c := range scanColumns {
		cols[c.Name] = i
	}
	for _, tc := range []struct {
		name        string
		row         store.Scan
		rep         ingestions.Report
		fail        int64
		failCounts  map[string]int64
		scannedCell string
		fileCell    string
		sourceCell  string
		// the scan's fileName, uploadedBy, source; <nil> when absent
		report [3]string
	}{
		{"uploaded, with FAIL findings",
			store.Scan{ID: "s1", ScannedAt: scanned, Failing: map[string]int{"critical": 1, "high": 2}},
			ingestions.Report{FileName: "nightly.ocsf.json", UploadedBy: "ci-bot", Source: "upload"},
			3, map[string]int64{"critical": 1, "high": 2}, "26h", "nightly.ocsf.json", "upload", [3]string{"nightly.ocsf.json", "ci-bot", "upload"}},
		{"declared, nothing failed",
			store.Scan{ID: "s2", ScannedAt: scanned},
			ingestions.Report{UploadedBy: "flux", Source: "configmap"},
			0, map[string]int64{}, "26h", "", "configmap", [3]string{"<nil>", "flux", "configmap"}},
		{"no finding yet, Ingestion deleted",
			store.Scan{ID: "s3"}, ingestions.Report{},
			0, map[string]int64{}, "<unknown>", "", "", [3]string{"<nil>", "<nil>", "<nil>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := toScan(&tc.row, tc.rep, "tenant-a")
			if sc.FailCount != tc.fail || fmt.Sprint(sc.FailCounts) != fmt.Sprint(tc.failCounts) || sc.FailCounts == nil {
				t.Errorf("failCount %d failCounts %v, want %d %v (never nil)", sc.FailCount, sc.FailCounts, tc.fail, tc.failCounts)
			}
			if (sc.ScannedAt == nil) != tc.row.ScannedAt.IsZero() {
				t.Errorf("scannedAt %v from the store's %v", sc.ScannedAt, tc.row.ScannedAt)
			}
			if got := [3]string{deref(sc.FileName), deref(sc.UploadedBy), deref(sc.Source)}; got != tc.report {
				t.Errorf("fileName, uploadedBy, source %q from the report %+v, want %q", got, tc.rep, tc.report)
			}
			table, err := (&scanStorage{}).ConvertToTable(context.Background(), &datav1.ScanList{Items: []datav1.Scan{*sc}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cells := table.Rows[0].Cells
			if len(cells) != len(scanColumns) {
				t.Fatalf("%d cells for %d columns", len(cells), len(scanColumns))
			}
			for col, want := range map[string]any{"Fail": tc.fail, "Scanned": tc.scannedCell, "File": tc.fileCell, "Source": tc.sourceCell} {
				if got := cells[cols[col]]; got != want {
					t.Errorf("%s cell %#v, want %#v", col, got, want)
				}
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
