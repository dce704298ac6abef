package webhook_test

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

// scanRecord is one valid Detection Finding of a crafted report.
type scanRecord struct {
	scan, uid, status, severity string
	severityID                  int
	at                          time.Time
}

// scanReport makes a report of records from the mixed example's first
// (valid) record.
func scanReport(t *testing.T, records []scanRecord) []byte {
	t.Helper()
	var base []map[string]any
	if err := json.Unmarshal(example(t, "aws_mixed_7_records.ocsf.json"), &base); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(base[0])
	out := make([]map[string]any, 0, len(records))
	for _, r := range records {
		var rec map[string]any
		_ = json.Unmarshal(raw, &rec)
		rec["status_code"], rec["severity"], rec["severity_id"], rec["time"] = r.status, r.severity, r.severityID, r.at.Unix()
		delete(rec, "time_dt")
		rec["finding_info"].(map[string]any)["uid"] = r.uid
		unmapped, _ := rec["unmapped"].(map[string]any)
		if unmapped == nil {
			unmapped = map[string]any{}
		}
		unmapped["scan_id"] = r.scan
		rec["unmapped"] = unmapped
		out = append(out, rec)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestScanListDescribesItsRun: a listed scan says which report it came
// from (file name, who uploaded it, how), when the scanner ran as its
// findings say, what failed in it by severity, and links its findings; on
// both engines.
func TestScanListDescribesItsRun(t *testing.T) {
	const scanA, scanB = "0c6a3f0e-6a43-4c39-9d57-0a7e5f0c0001", "0c6a3f0e-6a43-4c39-9d57-0a7e5f0c0002"
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	records := []scanRecord{
		{scanA, "a-critical", "FAIL", "Critical", 5, t0.Add(time.Minute)},
		{scanA, "a-high", "FAIL", "High", 4, t0},
		{scanA, "a-high-2", "FAIL", "High", 4, t0.Add(2 * time.Minute)},
		// The earliest finding of the scan passed: the scan still ran then.
		{scanA, "a-pass", "PASS", "Low", 2, t0.Add(-time.Hour)},
		{scanB, "b-pass", "PASS", "Low", 2, t0.Add(time.Hour)},
	}
	want := map[string]struct {
		scanned  string
		fails    int
		failing  map[string]any
		findings int
	}{
		scanA: {t0.Add(-time.Hour).Format(time.RFC3339), 3, map[string]any{"critical": 1.0, "high": 2.0}, 4},
		scanB: {t0.Add(time.Hour).Format(time.RFC3339), 0, map[string]any{}, 1},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			env := apitest.Start(t, apitest.Options{Postgres: engine == "postgres"})
			a := newAPI(t, env)
			id, status, _ := a.ingest("nightly.ocsf.json", scanReport(t, records))
			if status != "completed" {
				t.Fatalf("the report's ingestion ended %s", status)
			}
			var ing posturev1.Ingestion
			if err := env.APIReader.Get(context.Background(), keyOf(env.Namespace, id), &ing); err != nil {
				t.Fatal(err)
			}
			uploader := ing.Spec.RequestedBy.User
			if uploader == "" {
				t.Fatal("the Ingestion names no user: the test would prove nothing")
			}
			d := a.list("/api/v1/scans", "")
			if len(d.Data) != len(want) {
				t.Fatalf("%d scans listed, want %d: %+v", len(d.Data), len(want), d.Data)
			}
			for _, sc := range d.Data {
				w, ok := want[sc.ID]
				if !ok {
					t.Fatalf("unexpected scan %s", sc.ID)
				}
				at := sc.Attributes
				scanned, _ := time.Parse(time.RFC3339Nano, at["scanned_at"].(string))
				for _, c := range []struct {
					attr      string
					got, want any
				}{
					{"file_name", at["file_name"], "nightly.ocsf.json"},
					{"uploaded_by", at["uploaded_by"], uploader},
					{"source", at["source"], "upload"},
					{"scanned_at", scanned.Format(time.RFC3339), w.scanned},
					{"fail_count", at["fail_count"], float64(w.fails)},
					{"fail_counts", at["fail_counts"], w.failing},
				} {
					if !reflect.DeepEqual(c.got, c.want) {
						t.Errorf("scan %s: %s = %#v, want %#v", sc.ID, c.attr, c.got, c.want)
					}
				}
				// The link lists the scan's findings, and no other's.
				link, err := url.Parse(sc.Links["findings"])
				if err != nil || link.Path != "/api/v1/findings" {
					t.Fatalf("scan %s: links.findings = %q", sc.ID, sc.Links["findings"])
				}
				if got := a.list(link.Path, link.RawQuery).Meta.Pagination.Count; got != w.findings {
					t.Errorf("scan %s: links.findings lists %d findings, want %d", sc.ID, got, w.findings)
				}
				if fails := a.list("/api/v1/findings", queryOf("filter[scan]", sc.ID, "filter[status_code]", "FAIL")).Meta.Pagination.Count; float64(fails) != at["fail_count"] {
					t.Errorf("scan %s: fail_count %v, but the API lists %d FAIL findings", sc.ID, at["fail_count"], fails)
				}
			}

			// The ingestion gone, its scans no longer know their report.
			if err := env.Client.Delete(context.Background(), &ing); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 30*time.Second, "the Ingestion deleted", func() (bool, string) {
				err := env.APIReader.Get(context.Background(), keyOf(env.Namespace, id), &posturev1.Ingestion{})
				return apierrors.IsNotFound(err), "still there"
			})
			testenv.Eventually(t, 30*time.Second, "the scans without their report", func() (bool, string) {
				for _, sc := range a.list("/api/v1/scans", "").Data {
					for _, attr := range []string{"file_name", "uploaded_by", "source"} {
						if sc.Attributes[attr] != nil {
							return false, sc.ID + " " + attr + " still set"
						}
					}
				}
				return true, ""
			})
			var typed restapi.ListDocument[restapi.Scan]
			decode(t, a.get("/api/v1/scans", "fields[scans]=file_name,fail_count"), &typed)
			if len(typed.Data) != len(want) || typed.Data[0].Attributes.FileName != nil {
				t.Errorf("sparse scans: %+v", typed.Data)
			}
		})
	}
}
