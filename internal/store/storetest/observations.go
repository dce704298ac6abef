package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// testFindingObservations: a finding's observations are its uid's findings
// of its account and tenant, one per scan, newest first, paged.
func testFindingObservations(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Three scans of account 123456789012 report uid "u": FAIL an hour
	// apart, then PASS. scan-3 and scan-4 share an event time: the one
	// written later comes first.
	at := func(scan string, h int, status string) store.Finding {
		f := finding(scan, "u")
		f.Time = baseTime.Add(time.Duration(h) * time.Hour)
		f.StatusCode = status
		return f
	}
	scan := func(id, account string) store.Scan {
		return store.Scan{ID: id, ProviderType: "aws", ProviderUID: account, Trigger: "imported"}
	}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), "StartRun")
	other := finding("scan-1", "other")
	// The same uid in another account is another finding.
	elsewhere := at("scan-x", 5, "FAIL")
	elsewhere.ProviderUID = "999999999999"
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Scans:    []store.Scan{scan("scan-1", "123456789012"), scan("scan-2", "123456789012"), scan("scan-x", "999999999999")},
		Findings: []store.Finding{at("scan-1", 0, "FAIL"), at("scan-2", 1, "FAIL"), other, elsewhere},
	}), "WriteBatch 1")
	time.Sleep(2 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Scans: []store.Scan{scan("scan-3", "123456789012")}, Findings: []store.Finding{at("scan-3", 2, "PASS")}}), "WriteBatch 2")
	time.Sleep(2 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Scans: []store.Scan{scan("scan-4", "123456789012")}, Findings: []store.Finding{at("scan-4", 2, "pass")}}), "WriteBatch 3")
	must(t, s.StartRun(ctx, tenantB, "ing-9", 1, 1), "StartRun B")
	must(t, s.WriteBatch(ctx, tenantB, "ing-9", 1, store.Batch{
		Scans: []store.Scan{scan("scan-9", "123456789012")}, Findings: []store.Finding{at("scan-9", 9, "FAIL")}}), "WriteBatch B")

	q := store.ObservationQuery{UID: "u", ProviderType: "aws", ProviderUID: "123456789012"}
	got, total, err := s.FindingObservations(ctx, tenantA, q)
	must(t, err, "FindingObservations")
	want := []string{"scan-4", "scan-3", "scan-2", "scan-1"}
	if total != len(want) {
		t.Fatalf("FindingObservations counted %d; want %d", total, len(want))
	}
	if scans := scansOf(got); fmt.Sprint(scans) != fmt.Sprint(want) {
		t.Fatalf("FindingObservations scans = %v; want %v (newest first)", scans, want)
	}
	o := got[0]
	if o.ID != store.FindingID(tenantA, "scan-4", "u") || o.IngestionID != "ing-1" || o.StatusCode != "PASS" ||
		o.Status != "New" || o.Severity != "high" || o.SeverityID != 4 || !o.Time.Equal(baseTime.Add(2*time.Hour)) || o.InsertedAt.IsZero() {
		t.Errorf("first observation = %+v", o)
	}

	q.Page = store.Page{Number: 2, Size: 3}
	got, total, err = s.FindingObservations(ctx, tenantA, q)
	must(t, err, "FindingObservations page 2")
	if scans := scansOf(got); total != 4 || fmt.Sprint(scans) != "[scan-1]" {
		t.Errorf("FindingObservations page 2 of 3 = %v (total %d); want [scan-1] (total 4)", scans, total)
	}

	for _, tc := range []struct {
		name   string
		tenant string
		q      store.ObservationQuery
		want   string
	}{
		{"another account", tenantA, store.ObservationQuery{UID: "u", ProviderType: "aws", ProviderUID: "999999999999"}, "[scan-x]"},
		{"another tenant", tenantB, store.ObservationQuery{UID: "u", ProviderType: "aws", ProviderUID: "123456789012"}, "[scan-9]"},
		{"unknown uid", tenantA, store.ObservationQuery{UID: "nope", ProviderType: "aws", ProviderUID: "123456789012"}, "[]"},
	} {
		got, total, err := s.FindingObservations(ctx, tc.tenant, tc.q)
		must(t, err, tc.name)
		if scans := scansOf(got); fmt.Sprint(scans) != tc.want || total != len(got) {
			t.Errorf("%s: FindingObservations = %v (total %d); want %s", tc.name, scans, total, tc.want)
		}
	}
}

func scansOf(os []store.Observation) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, o.ScanID)
	}
	return out
}
