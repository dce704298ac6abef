package aggregated_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/restapi"
)

// scansAgree reads namespace ns's scans through kubectl and through the
// REST API (GET /api/v1/scans) and fails the test where the two say
// differently what a scan is: when it ran, what failed, which report wrote
// it. Kubernetes times are to the second; the REST API's to the
// nanosecond. It returns the scans as kubectl read them.
func scansAgree(t *testing.T, k kubectl, env *apitest.Env, ns string) map[string]datav1.Scan {
	t.Helper()
	var list datav1.ScanList
	if err := json.Unmarshal([]byte(k.ok("get", "scans", "-n", ns, "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	kube := map[string]datav1.Scan{}
	for _, sc := range list.Items {
		kube[sc.Name] = sc
	}
	resp, err := env.API().Get(context.Background(), restapi.PathScans, url.Values{"page[size]": {"100"}})
	if err != nil {
		t.Fatal(err)
	}
	var doc restapi.ListDocument[restapi.Scan]
	if err := resp.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Meta.Pagination.Count != len(doc.Data) || len(doc.Data) != len(kube) {
		t.Fatalf("REST lists %d of %d scans on its page, kubectl %d", len(doc.Data), doc.Meta.Pagination.Count, len(kube))
	}
	second := func(s string) string {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("REST time %q: %v", s, err)
		}
		return at.UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	str := func(p *string) string {
		if p == nil {
			return "<absent>"
		}
		return *p
	}
	for _, r := range doc.Data {
		sc, ok := kube[r.ID]
		if !ok {
			t.Errorf("REST lists scan %s, kubectl does not", r.ID)
			continue
		}
		a := r.Attributes
		scanned := "<absent>"
		if sc.ScannedAt != nil {
			scanned = sc.ScannedAt.UTC().Format(time.RFC3339)
		}
		restScanned := "<absent>"
		if a.ScannedAt != nil {
			restScanned = second(*a.ScannedAt)
		}
		for _, c := range []struct{ field, kube, rest string }{
			{"scannedAt", scanned, restScanned},
			{"creationTimestamp", sc.CreationTimestamp.UTC().Format(time.RFC3339), second(a.InsertedAt)},
			{"fileName", str(sc.FileName), str(a.FileName)},
			{"uploadedBy", str(sc.UploadedBy), str(a.UploadedBy)},
			{"source", str(sc.Source), str(a.Source)},
			{"ingestion", sc.Ingestion, a.IngestionID},
		} {
			if c.kube != c.rest {
				t.Errorf("scan %s: %s %q through kubectl, the REST API says %q", r.ID, c.field, c.kube, c.rest)
			}
		}
		if sc.FailCount != a.FailCount || !maps.Equal(sc.FailCounts, a.FailCounts) || int64(sc.FindingCount) != a.FindingCount {
			t.Errorf("scan %s: failCount %d failCounts %v findingCount %d through kubectl, the REST API says %d %v %d",
				r.ID, sc.FailCount, sc.FailCounts, sc.FindingCount, a.FailCount, a.FailCounts, a.FindingCount)
		}
	}
	return kube
}

// scanColumns checks kubectl's table of the scans: its header, and for
// scan (one whose report was uploaded) the FAIL cell and, with -o wide,
// the report's file name and source.
func scanColumns(t *testing.T, k kubectl, ns string, sc datav1.Scan) {
	t.Helper()
	header := strings.Fields(strings.SplitN(k.ok("get", "scans", "-n", ns), "\n", 2)[0])
	if want := []string{"NAME", "PROVIDER", "FINDINGS", "FAIL", "INGESTION", "SCANNED", "AGE"}; !slices.Equal(header, want) {
		t.Errorf("kubectl get scans header %q, want %q", header, want)
	}
	header = strings.Fields(strings.SplitN(k.ok("get", "scans", "-n", ns, "-o", "wide"), "\n", 2)[0])
	if want := []string{"NAME", "PROVIDER", "FINDINGS", "FAIL", "INGESTION", "SCANNED", "AGE", "FILE", "SOURCE"}; !slices.Equal(header, want) {
		t.Errorf("kubectl get scans -o wide header %q, want %q", header, want)
	}
	cells := strings.Fields(k.ok("get", "scan/"+sc.Name, "-n", ns, "-o", "wide", "--no-headers"))
	if len(cells) != 9 {
		t.Fatalf("kubectl get scan/%s -o wide printed %d cells, want 9: %q", sc.Name, len(cells), cells)
	}
	if cells[3] != strconv.FormatInt(sc.FailCount, 10) || cells[5] == "<unknown>" || cells[7] != *sc.FileName || cells[8] != *sc.Source {
		t.Errorf("kubectl get scan/%s -o wide: FAIL %q SCANNED %q FILE %q SOURCE %q; want %d, an age, %q, %q",
			sc.Name, cells[3], cells[5], cells[7], cells[8], sc.FailCount, *sc.FileName, *sc.Source)
	}
}
