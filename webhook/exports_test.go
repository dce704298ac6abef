package webhook_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/webhook"
	"github.com/posture-dev/posture/webhook/ui"
)

// exportSize is how many findings the round trip exports: enough pages
// (a hundred of export.PageSize) that only a streamed export stays small.
const exportSize = 100_000

// seedGenerated ingests n generated scanner records (internal/reportgen,
// the bench's reports) through the worker, as hack/bench's read phase
// loads its database: the fastest way to a store whose findings, scans and
// current state are what an upload leaves.
func seedGenerated(t *testing.T, b *bareEnv, n int) *reportgen.Generator {
	t.Helper()
	ctx := context.Background()
	gen, err := reportgen.New()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(gen.WriteRange(pw, 0, n)) }()
	blob, err := b.Store.PutBlob(ctx, b.Tenant, pr)
	if err != nil {
		t.Fatal(err)
	}
	w := &ingest.Worker{Store: b.Store, Log: logr.Discard()}
	if err := w.Run(ctx, ingest.Attempt{Tenant: b.Tenant, Namespace: b.Namespace, IngestionID: "export-load", BlobID: blob.ID,
		Attempt: 1, Total: n, ReportSHA256: blob.SHA256}); err != nil {
		t.Fatal(err)
	}
	run, err := b.Store.GetRun(ctx, b.Tenant, "export-load")
	if err != nil || run.Status != store.RunSucceeded || run.Processed != n || run.Invalid != 0 {
		t.Fatalf("the load's run: %+v, %v; want %d records succeeded", run, err, n)
	}
	return gen
}

// exportGet starts an export and returns the response, its body unread.
func exportGet(t *testing.T, b *bareEnv, path, query string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.URL+path+"?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Api-Key "+b.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readCSVExport parses a CSV export with encoding/csv and returns its rows
// by column name, checking the header.
func readCSVExport(t *testing.T, body io.Reader, cols []string) []map[string]string {
	t.Helper()
	r := csv.NewReader(bufio.NewReaderSize(body, 1<<20))
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		t.Fatalf("CSV header: %v", err)
	}
	if !slices.Equal(header, cols) {
		t.Fatalf("CSV header = %q, want %q", header, cols)
	}
	var rows []map[string]string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows
		}
		if err != nil {
			t.Fatalf("CSV row %d: %v", len(rows)+1, err)
		}
		row := make(map[string]string, len(cols))
		for i, c := range cols {
			row[c] = rec[i]
		}
		rows = append(rows, row)
	}
}

// ocsfUIDs parses an OCSF export (a JSON array of records) element by
// element and returns each record's finding_info.uid, in order.
func ocsfUIDs(t *testing.T, body io.Reader) []string {
	t.Helper()
	dec := json.NewDecoder(bufio.NewReaderSize(body, 1<<20))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		t.Fatalf("OCSF export starts with %v (%v), want [", tok, err)
	}
	var uids []string
	for dec.More() {
		var rec struct {
			ClassUID    int `json:"class_uid"`
			FindingInfo struct {
				UID string `json:"uid"`
			} `json:"finding_info"`
		}
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("OCSF record %d: %v", len(uids)+1, err)
		}
		if rec.ClassUID != 2004 || rec.FindingInfo.UID == "" {
			t.Fatalf("OCSF record %d is not a Detection Finding with a uid: %+v", len(uids)+1, rec)
		}
		uids = append(uids, rec.FindingInfo.UID)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		t.Fatalf("OCSF export ends with %v (%v), want ]", tok, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("OCSF export goes on after its array: %v", err)
	}
	return uids
}

// onceEach checks that got holds every uid of the first n generated
// records exactly once.
func onceEach(t *testing.T, what string, gen *reportgen.Generator, n int, got []string) {
	t.Helper()
	seen := make(map[string]int, len(got))
	for _, u := range got {
		seen[u]++
	}
	for i := range n {
		if c := seen[gen.UID(i)]; c != 1 {
			t.Fatalf("%s: uid %s of record %d appears %d times, want once (%d rows)", what, gen.UID(i), i, c, len(got))
		}
	}
	if len(got) != n {
		t.Fatalf("%s: %d rows, want %d", what, len(got), n)
	}
}

// countingStore counts the store's listings, to tell when an export stops
// reading.
type countingStore struct {
	webhookStore
	lists atomic.Int64
	// failAfter, when above 0, fails every listing past that many.
	failAfter int64
}

type webhookStore interface {
	store.FindingReads
	store.IngestionErrors
	store.Blobs
}

func (c *countingStore) ListFindings(ctx context.Context, tenant string, q store.FindingQuery) ([]store.Finding, int, error) {
	if n := c.lists.Add(1); c.failAfter > 0 && n > c.failAfter {
		return nil, 0, errors.New("the database went away")
	}
	return c.webhookStore.ListFindings(ctx, tenant, q)
}

// Both exports of both listings hold every finding exactly once, however
// many pages they span, in a file their readers parse: CSV with
// encoding/csv, OCSF as the JSON array an upload takes.
func TestExportRoundTrip(t *testing.T) {
	b := startBare(t, bareOpts{})
	start := time.Now()
	gen := seedGenerated(t, b, exportSize)
	t.Logf("stored %d findings in %s", exportSize, time.Since(start).Round(time.Millisecond))

	for _, tc := range []struct {
		path    string
		current bool
	}{{webhook.PathFindingsExport, false}, {webhook.PathLatestFindingsExport, true}} {
		t.Run(tc.path+"/csv", func(t *testing.T) {
			start := time.Now()
			resp := exportGet(t, b, tc.path, "format=csv", nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != export.CSV.MediaType() {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			disp := resp.Header.Get("Content-Disposition")
			if !strings.HasPrefix(disp, `attachment; filename="findings-`) || !strings.HasSuffix(disp, `.csv"`) ||
				strings.Contains(disp, "current") != tc.current {
				t.Errorf("Content-Disposition = %q", disp)
			}
			cols := export.Columns
			if tc.current {
				cols = export.CurrentColumns
			}
			rows := readCSVExport(t, resp.Body, cols)
			t.Logf("read %d CSV rows in %s", len(rows), time.Since(start).Round(time.Millisecond))
			uids := make([]string, len(rows))
			for i, r := range rows {
				uids[i] = r["uid"]
				if r["severity"] == "" || r["check_id"] == "" || r["scan_id"] == "" || r["ingestion_id"] != "export-load" ||
					!slices.Contains(reportgen.Accounts, r["account"]) {
					t.Fatalf("row %d = %v", i+1, r)
				}
				if _, err := time.Parse(time.RFC3339, r["time"]); err != nil {
					t.Fatalf("row %d: time %q: %v", i+1, r["time"], err)
				}
				if tc.current && (r["delta"] != "new" || r["first_seen_at"] == "") {
					t.Fatalf("row %d of the current state: delta %q, first_seen_at %q; want new and a time", i+1, r["delta"], r["first_seen_at"])
				}
			}
			onceEach(t, "CSV", gen, exportSize, uids)
		})
		t.Run(tc.path+"/ocsf", func(t *testing.T) {
			start := time.Now()
			resp := exportGet(t, b, tc.path, "format=ocsf", nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if disp := resp.Header.Get("Content-Disposition"); !strings.HasSuffix(disp, `.ocsf.json"`) {
				t.Errorf("Content-Disposition = %q; an upload takes only .ocsf.json", disp)
			}
			uids := ocsfUIDs(t, resp.Body)
			t.Logf("read %d OCSF records in %s", len(uids), time.Since(start).Round(time.Millisecond))
			onceEach(t, "OCSF", gen, exportSize, uids)
		})
	}

	// The list's filters and sort hold for the export: every critical
	// finding, by uid, as many as the list counts.
	t.Run("filtered", func(t *testing.T) {
		q := "filter[severity]=critical&filter[status_code]=FAIL&sort=uid"
		resp := exportGet(t, b, webhook.PathLatestFindingsExport, q, http.Header{"Accept": {"text/csv"}})
		if resp.StatusCode != 200 {
			t.Fatalf("%d", resp.StatusCode)
		}
		rows := readCSVExport(t, resp.Body, export.CurrentColumns)
		want := b.api(t).list("/api/v1/findings/latest", q).Meta.Pagination.Count
		if len(rows) == 0 || len(rows) != want {
			t.Fatalf("%d rows exported, the list counts %d", len(rows), want)
		}
		for i, r := range rows {
			if r["severity"] != "critical" || r["status_code"] != "FAIL" || (i > 0 && r["uid"] < rows[i-1]["uid"]) {
				t.Fatalf("row %d = %v after %v: not a critical failure in uid order", i+1, r, rows[max(i-1, 0)])
			}
		}
	})

	// A client that stops reading ends the export: it does not read the
	// store to the end for nobody.
	t.Run("client gone", func(t *testing.T) {
		counting := &countingStore{webhookStore: b.Server.Store}
		b.Server.Store = counting
		t.Cleanup(func() { b.Server.Store = counting.webhookStore })
		resp := exportGet(t, b, webhook.PathFindingsExport, "format=ocsf", nil)
		if _, err := io.ReadFull(resp.Body, make([]byte, 1<<16)); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		deadline := time.Now().Add(30 * time.Second)
		for last := int64(-1); ; time.Sleep(200 * time.Millisecond) {
			n := counting.lists.Load()
			if n == last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the export still reads the store 30 s after its client left (%d pages)", n)
			}
			last = n
		}
		if n, all := counting.lists.Load(), int64(exportSize/export.PageSize); n >= all/2 {
			t.Fatalf("the export read %d pages of %d after its client left at the first", n, all)
		}
	})
}

// A store failure in the middle of an export aborts the connection: the
// client's read fails instead of ending in a file that looks whole.
func TestExportFailureMidStream(t *testing.T) {
	b := startBare(t, bareOpts{})
	seedFindings(t, b, export.PageSize*2+10)
	counting := &countingStore{webhookStore: b.Server.Store, failAfter: 1}
	b.Server.Store = counting
	for _, format := range []string{"csv", "ocsf"} {
		counting.lists.Store(0)
		resp := exportGet(t, b, webhook.PathFindingsExport, "format="+format, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", format, resp.StatusCode)
		}
		body, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: reading an export that failed after %d bytes: %v; want unexpected EOF", format, len(body), err)
		}
		if lines := strings.Count(string(body), "\n"); lines < export.PageSize {
			t.Fatalf("%s: %d lines arrived before the failure; want the first page's", format, lines)
		}
	}
	// A failure on the first page is answered as an error: nothing was
	// written yet.
	counting.lists.Store(1)
	wantError(t, exportAPI(b.api(t), webhook.PathFindingsExport, "format=csv"), 500, "error", "")
}

// Formula injection: a cell a spreadsheet would run starts with an
// apostrophe; the OCSF export carries the record unchanged.
func TestExportCSVCells(t *testing.T) {
	b := startBare(t, bareOpts{})
	ctx := context.Background()
	raw := `{"finding_info":{"uid":"-1+1","title":"=HYPERLINK(\"http://evil\",\"x\")"}}`
	f := store.Finding{UID: "-1+1", ScanID: "scan-x", CheckID: "@check", Title: `=HYPERLINK("http://evil","x")`, Severity: "high",
		SeverityID: 4, StatusCode: "FAIL", Region: "eu-west-1", ProviderType: "aws", ProviderUID: "+123",
		ResourceUID: "arn:aws:s3:::b, with \"quotes\"\nand a line", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Raw: []byte(raw)}
	if err := b.Store.StartRun(ctx, b.Tenant, "ing-x", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Store.WriteBatch(ctx, b.Tenant, "ing-x", 1, store.Batch{Findings: []store.Finding{f}}); err != nil {
		t.Fatal(err)
	}
	rows := readCSVExport(t, exportGet(t, b, webhook.PathFindingsExport, "format=csv", nil).Body, export.Columns)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	for col, want := range map[string]string{
		"uid": "'-1+1", "title": `'=HYPERLINK("http://evil","x")`, "check_id": "'@check", "account": "'+123",
		"resource_uid": "arn:aws:s3:::b, with \"quotes\"\nand a line", "time": "2026-01-02T03:04:05Z", "severity_id": "4",
	} {
		if r[col] != want {
			t.Errorf("%s = %q, want %q", col, r[col], want)
		}
	}
	body, err := io.ReadAll(exportGet(t, b, webhook.PathFindingsExport, "format=ocsf", nil).Body)
	if err != nil || string(body) != "[\n"+raw+"\n]\n" {
		t.Fatalf("OCSF export = %q, %v", body, err)
	}
	// CRLF ends each record (RFC 4180).
	body, _ = io.ReadAll(exportGet(t, b, webhook.PathFindingsExport, "format=csv", nil).Body)
	if !strings.HasPrefix(string(body), strings.Join(export.Columns, ",")+"\r\n") {
		t.Errorf("CSV begins %q", body[:min(len(body), 200)])
	}
	// An empty listing is a file too: the header, or an empty array.
	body, _ = io.ReadAll(exportGet(t, b, webhook.PathFindingsExport, "format=ocsf&filter[region]=nowhere", nil).Body)
	if string(body) != "[]\n" {
		t.Errorf("empty OCSF export = %q", body)
	}
}

// exportAPI GETs an export as a client that takes any media type.
func exportAPI(a *api, path, query string) response {
	a.t.Helper()
	return a.request(http.MethodGet, path+"?"+query, nil, http.Header{"Accept": {"*/*"}})
}

// An export answers what is wrong with its request as the list does,
// before the file begins.
func TestExportRequests(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	if !slices.Equal(ui.DownloadPaths, []string{webhook.PathFindingsExport, webhook.PathLatestFindingsExport}) {
		t.Fatalf("the UI lets links download %q; the exports are at %s and %s", ui.DownloadPaths, webhook.PathFindingsExport, webhook.PathLatestFindingsExport)
	}
	wantError(t, exportAPI(a, webhook.PathFindingsExport, "format=xml"), 400, "invalid", "parameter:format", `unknown export format "xml"`)
	wantError(t, exportAPI(a, webhook.PathFindingsExport, ""), 400, "invalid", "parameter:format", "format=csv or format=ocsf")
	wantError(t, exportAPI(a, webhook.PathFindingsExport, "format=csv&page[size]=10"), 400, "invalid", "parameter:page[size]", "does not apply to an export")
	wantError(t, exportAPI(a, webhook.PathFindingsExport, "format=csv&fields[findings]=uid"), 400, "invalid", "parameter:fields[findings]")
	wantError(t, exportAPI(a, webhook.PathFindingsExport, "format=csv&filter[delta]=new"), 400, "invalid", "parameter:filter[delta]")
	wantError(t, exportAPI(a, webhook.PathFindingsExport, "format=csv&sort=color"), 400, "invalid", "parameter:sort")
	wantError(t, exportAPI(a, webhook.PathLatestFindingsExport, "format=csv&filter[search]=ab"), 400, "invalid", "parameter:filter[search]")
	if r := a.request(http.MethodGet, webhook.PathFindingsExport+"?format=csv", nil, nil); r.status != 200 || r.header.Get("Content-Type") != export.CSV.MediaType() {
		t.Errorf("format=csv asked by a JSON:API client: %d %s; the parameter wins over Accept", r.status, r.header.Get("Content-Type"))
	}
	wantError(t, a.request(http.MethodPost, webhook.PathFindingsExport+"?format=csv", nil, nil), 405, "method_not_allowed", "")
	unauth := &api{t: t, url: b.URL}
	wantError(t, exportAPI(unauth, webhook.PathFindingsExport, "format=csv"), 401, "not_authenticated", "header:Authorization")

	for _, tc := range []struct{ accept, want string }{
		{"text/csv", export.CSV.MediaType()},
		{"application/json", "application/json"},
		{"application/json;q=0.5, text/csv", export.CSV.MediaType()},
		{"text/csv;q=0.2, application/json", "application/json"},
	} {
		r := a.request(http.MethodGet, webhook.PathLatestFindingsExport, nil, http.Header{"Accept": {tc.accept}})
		if r.status != 200 || r.header.Get("Content-Type") != tc.want {
			t.Errorf("Accept: %s: %d %s, want %s", tc.accept, r.status, r.header.Get("Content-Type"), tc.want)
		}
	}
}
