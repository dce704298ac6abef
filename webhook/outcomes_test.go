package webhook_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/apitest"
)

// report is a test report: its bytes and what the API must make of it.
type report struct {
	name    string
	content []byte
	curl    bool // sent with curl instead of Go's client
	status  string
	summary summary
	// errors are the expected error rows as "index code pointer" (index "-"
	// for ingestion-level), in the order the API lists them.
	errors []string
	// valid are the records that must become findings.
	valid []map[string]any
}

func parseRecords(t testing.TB, content []byte) []map[string]any {
	t.Helper()
	var recs []map[string]any
	if err := json.Unmarshal(content, &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func uidOf(r map[string]any) string {
	fi, _ := r["finding_info"].(map[string]any)
	s, _ := fi["uid"].(string)
	return s
}

// fixtureReport derives the expected outcome of a Prowler example from its
// content: within a file the first record claims a finding uid, later ones
// are duplicate_uid; records without an account are missing_account.
func fixtureReport(t testing.TB, name string) report {
	content := fixture(t, name)
	recs := parseRecords(t, content)
	r := report{name: name, content: content, curl: true, summary: summary{total: len(recs), processed: len(recs)}}
	seen := map[string]bool{}
	var rows []string
	for i, rec := range recs {
		bad := false
		cloud, _ := rec["cloud"].(map[string]any)
		account, _ := cloud["account"].(map[string]any)
		um, _ := rec["unmapped"].(map[string]any)
		if account["uid"] == nil && um["provider_uid"] == nil {
			rows = append(rows, fmt.Sprintf("%d missing_account /cloud/account/uid", i))
			bad = true
		}
		if seen[uidOf(rec)] {
			rows = append(rows, fmt.Sprintf("%d duplicate_uid /finding_info/uid", i))
			bad = true
		}
		seen[uidOf(rec)] = true
		if bad {
			r.summary.invalid++
		} else {
			r.valid = append(r.valid, rec)
		}
	}
	r.status = "completed"
	if len(r.valid) == 0 {
		r.status = "failed"
		rows = append([]string{"- no_records "}, rows...)
	}
	r.errors = rows
	return r
}

// withRecords builds a report from fixture records changed by edit.
func withRecords(t testing.TB, recs []map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func outcomeReports(t testing.TB) []report {
	reports := []report{
		{name: "aws_1500_records.ocsf.json", content: fixture(t, "aws_1500_records.ocsf.json"), curl: true,
			status: "completed", summary: summary{1500, 1500, 0}},
		fixtureReport(t, "example_output_aws.ocsf.json"),
		fixtureReport(t, "example_output_azure.ocsf.json"),
		fixtureReport(t, "example_output_gcp.ocsf.json"),
		fixtureReport(t, "example_output_kubernetes.ocsf.json"),
		{name: "empty.ocsf.json", content: []byte("[]"), status: "failed", summary: summary{0, 0, 0},
			errors: []string{"- no_records "}},
	}
	reports[0].valid = parseRecords(t, reports[0].content)
	for _, name := range []string{"example_output_aws.ocsf.json", "example_output_kubernetes.ocsf.json"} {
		for _, r := range reports {
			if r.name == name && len(r.errors) == 0 {
				t.Fatalf("%s: expected errors, the fixture changed?", name)
			}
		}
	}

	// Only other OCSF classes: one unsupported_class row per record.
	other := parseRecords(t, fixture(t, "aws_3_records.ocsf.json"))
	for i, cls := range []int{2003, 1001, 4001} {
		other[i]["class_uid"] = cls
	}
	reports = append(reports, report{name: "other_classes.ocsf.json", content: withRecords(t, other), status: "failed",
		summary: summary{3, 3, 3}, errors: []string{"- no_records ", "0 unsupported_class /class_uid",
			"1 unsupported_class /class_uid", "2 unsupported_class /class_uid"}})

	// time in epoch seconds and in epoch milliseconds.
	epoch := parseRecords(t, fixture(t, "aws_3_records.ocsf.json"))
	for i, tm := range []int64{1735570800, 1735570800123, 1735570800999} {
		epoch[i]["time"] = tm
		epoch[i]["finding_info"].(map[string]any)["uid"] = fmt.Sprintf("epoch-%d", i)
	}
	reports = append(reports, report{name: "epoch.ocsf.json", content: withRecords(t, epoch), status: "completed",
		summary: summary{3, 3, 0}, valid: epoch})

	// A member named twice has no single reading: such records are invalid,
	// wherever the repeat is, and the valid record beside them is kept.
	dup := parseRecords(t, fixture(t, "aws_3_records.ocsf.json"))
	var raws []string
	for i, rec := range dup {
		rec["finding_info"].(map[string]any)["uid"] = fmt.Sprintf("dupkey-%d", i)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, string(b))
	}
	raws[1] = `{"class_uid":9999,` + raws[1][1:]
	raws[2] = strings.Replace(raws[2], `"uid":"prowler"`, `"uid":"prowler","uid":"other"`, 1)
	reports = append(reports, report{name: "duplicate_members.ocsf.json", content: []byte("[" + strings.Join(raws, ",") + "]"),
		status: "completed", summary: summary{3, 3, 2}, valid: dup[:1],
		errors: []string{"1 duplicate_key /class_uid", "2 duplicate_key /metadata/product/uid"}})

	aws3 := fixture(t, "aws_3_records.ocsf.json")
	reports = append(reports, report{name: "aws_3_records.ocsf.json", content: aws3, status: "completed",
		summary: summary{3, 3, 0}, valid: parseRecords(t, aws3)})
	return reports
}

// TestOutcomes uploads the fixtures and crafted reports on both engines and
// checks the jobs' outcomes, their error rows, and the findings and scans
// they produced, read back through the API.
func TestOutcomes(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		// Not parallel: the managers of two apitest environments in one
		// process would both reconcile every Ingestion.
		t.Run(engine, func(t *testing.T) {
			env := apitest.Start(t, apitest.Options{Postgres: engine == "postgres"})
			a := newAPI(t, env)
			reports := outcomeReports(t)
			ids := make([]string, len(reports))
			for i, r := range reports {
				if r.curl {
					ids[i] = accepted(t, a.curlUpload(r.name, r.content, ""), r.summary.total)
				} else {
					ids[i] = accepted(t, a.upload(r.name, r.content), r.summary.total)
				}
			}
			for i, r := range reports {
				t.Run(r.name, func(t *testing.T) {
					status, sum := a.wait(ids[i])
					if status != r.status || sum != r.summary {
						t.Fatalf("job ended %s %+v, want %s %+v", status, sum, r.status, r.summary)
					}
					checkErrors(t, a, ids[i], r)
					d := a.list("/api/v1/findings", "filter[ingestion]="+ids[i]+"&page[size]=100&fields[findings]=uid,record")
					if d.Meta.Pagination.Count != len(r.valid) {
						t.Fatalf("%d findings, want %d", d.Meta.Pagination.Count, len(r.valid))
					}
					if len(r.valid) <= 100 {
						checkRecords(t, d, r.valid)
					}
				})
			}
			t.Run("time in seconds and milliseconds", func(t *testing.T) {
				d := a.list("/api/v1/findings", "filter[search]=epoch-&sort=uid&fields[findings]=uid,time")
				var got []string
				for _, f := range d.Data {
					got = append(got, f.Attributes["time"].(string))
				}
				want := []string{"2024-12-30T15:00:00Z", "2024-12-30T15:00:00.123Z", "2024-12-30T15:00:00.999Z"}
				if !slices.Equal(got, want) {
					t.Fatalf("times = %v, want %v", got, want)
				}
			})

			total := 0
			for _, r := range reports {
				total += len(r.valid)
			}
			findings := a.list("/api/v1/findings", "page[size]=1").Meta.Pagination.Count
			scans := a.list("/api/v1/scans", "").Meta.Pagination.Count
			if findings != total {
				t.Fatalf("%d findings in the tenant, want %d", findings, total)
			}
			t.Run("reads", func(t *testing.T) { checkReads(t, a, reports[0], ids[0]) })
			t.Run("re-uploading never duplicates findings", func(t *testing.T) {
				for _, r := range reports {
					if r.name == "aws_1500_records.ocsf.json" || r.name == "aws_3_records.ocsf.json" {
						_, status, sum := a.ingest(r.name, r.content)
						if status != r.status || sum != r.summary {
							t.Fatalf("%s again: %s %+v", r.name, status, sum)
						}
					}
				}
				if got := a.list("/api/v1/findings", "page[size]=1").Meta.Pagination.Count; got != findings {
					t.Fatalf("%d findings after re-uploading, %d before", got, findings)
				}
				if got := a.list("/api/v1/scans", "").Meta.Pagination.Count; got != scans {
					t.Fatalf("%d scans after re-uploading, %d before", got, scans)
				}
			})
		})
	}
}

func checkErrors(t *testing.T, a *api, id string, r report) {
	t.Helper()
	rows := a.allErrors(id)
	var got []string
	for _, e := range rows {
		idx := "-"
		if e.RecordIndex != nil {
			idx = strconv.Itoa(*e.RecordIndex)
		}
		got = append(got, idx+" "+e.Code+" "+e.Pointer)
		if e.Detail == "" {
			t.Errorf("row %+v has no detail", e)
		}
		switch e.Code {
		case "duplicate_uid":
			if e.Value != strconv.Quote(e.FindingUID) || !strings.Contains(e.Detail, "already used by record") {
				t.Errorf("duplicate_uid row %+v", e)
			}
		case "unsupported_class":
			if !strings.Contains(e.Detail, "only Detection Finding (2004)") {
				t.Errorf("unsupported_class row %+v", e)
			}
		case "no_records":
			if e.RecordIndex != nil || !strings.Contains(e.Detail, "Detection Finding") {
				t.Errorf("ingestion-level row %+v", e)
			}
		}
	}
	// Ingestion-level rows come first, then records in order; the rows of one
	// record may come in any order.
	index := func(row string) int {
		n, err := strconv.Atoi(strings.Fields(row)[0])
		if err != nil {
			return -1
		}
		return n
	}
	for i := 1; i < len(got); i++ {
		if index(got[i-1]) > index(got[i]) {
			t.Fatalf("error rows out of record order:\n%s", strings.Join(got, "\n"))
		}
	}
	norm := func(rows []string) []string {
		out := slices.Clone(rows)
		sort.SliceStable(out, func(i, j int) bool {
			if a, b := index(out[i]), index(out[j]); a != b {
				return a < b
			}
			return out[i] < out[j]
		})
		return out
	}
	if !slices.Equal(norm(got), norm(r.errors)) {
		t.Fatalf("errors =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(r.errors, "\n"))
	}
}

// checkRecords compares each finding's record with the uploaded one.
func checkRecords(t *testing.T, d listDoc, valid []map[string]any) {
	t.Helper()
	byUID := map[string]map[string]any{}
	for _, v := range valid {
		byUID[uidOf(v)] = v
	}
	for _, f := range d.Data {
		want, ok := byUID[f.Attributes["uid"].(string)]
		got := f.Attributes["record"]
		if !ok || !reflect.DeepEqual(normJSON(t, got), normJSON(t, want)) {
			t.Fatalf("finding %s: record differs from the uploaded one", f.Attributes["uid"])
		}
	}
}

func normJSON(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReads exercises the findings and scans endpoints on the 1500-record
// fixture (whose records are all valid), with expectations computed from
// the file itself.
func checkReads(t *testing.T, a *api, r report, ingestion string) {
	recs := r.valid
	count := func(f func(map[string]any) bool) int {
		n := 0
		for _, rec := range recs {
			if f(rec) {
				n++
			}
		}
		return n
	}
	str := func(rec map[string]any, path ...string) string {
		var v any = rec
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		s, _ := v.(string)
		return s
	}
	scans := a.list("/api/v1/scans", "filter[provider_uid]=123456789012&page[size]=100")
	var scan string
	for _, s := range scans.Data {
		if s.Attributes["ingestion_id"] != "" && s.Attributes["finding_count"] == 1500.0 {
			scan = s.ID
		}
	}
	if scan == "" {
		t.Fatalf("no scan holds the 1500 findings: %+v", scans.Data)
	}
	firstUID := uidOf(recs[0])
	check := str(recs[0], "metadata", "event_code")
	region := str(recs[0], "cloud", "region")
	prefix := "/api/v1/findings"

	filters := []struct {
		query string
		want  int
	}{
		{"filter[ingestion]=" + ingestion, 1500},
		{"filter[scan]=" + scan, 1500},
		{"filter[scan]=no-such-scan", 0},
		{"filter[severity]=critical&filter[scan]=" + scan, count(func(m map[string]any) bool { return strings.EqualFold(str(m, "severity"), "critical") })},
		{"filter[severity]=CRITICAL&filter[scan]=" + scan, count(func(m map[string]any) bool { return strings.EqualFold(str(m, "severity"), "critical") })},
		{"filter[severity__in]=critical,high&filter[scan]=" + scan, count(func(m map[string]any) bool {
			return strings.EqualFold(str(m, "severity"), "critical") || strings.EqualFold(str(m, "severity"), "high")
		})},
		{"filter[status_code]=fail&filter[scan]=" + scan, count(func(m map[string]any) bool { return str(m, "status_code") == "FAIL" })},
		{"filter[status_code__in]=PASS,manual&filter[scan]=" + scan, count(func(m map[string]any) bool { return str(m, "status_code") != "FAIL" })},
		{"filter[provider_type]=aws&filter[scan]=" + scan, 1500},
		{"filter[provider_type]=azure&filter[scan]=" + scan, 0},
		{"filter[provider_type__in]=gcp,AWS&filter[scan]=" + scan, 1500},
		{"filter[provider_uid]=123456789012&filter[scan]=" + scan, 1500},
		{"filter[check_id]=" + check + "&filter[scan]=" + scan, count(func(m map[string]any) bool { return str(m, "metadata", "event_code") == check })},
		{"filter[region]=" + region + "&filter[scan]=" + scan, count(func(m map[string]any) bool { return str(m, "cloud", "region") == region })},
		{"filter[search]=" + firstUID, 1},
		{"filter[search]=" + strings.ToUpper(firstUID[len(firstUID)-8:]), count(func(m map[string]any) bool {
			return strings.Contains(strings.ToLower(uidOf(m)+str(m, "finding_info", "title")+str(m, "metadata", "event_code")), strings.ToLower(firstUID[len(firstUID)-8:]))
		})},
		{"filter[search]=%25_%25", 0}, // LIKE wildcards match literally
		{"filter[severity]=low&filter[status_code]=PASS&filter[region]=" + region + "&filter[scan]=" + scan, count(func(m map[string]any) bool {
			return strings.EqualFold(str(m, "severity"), "low") && str(m, "status_code") == "PASS" && str(m, "cloud", "region") == region
		})},
	}
	for _, tc := range filters {
		t.Run(tc.query, func(t *testing.T) {
			d := a.list(prefix, tc.query)
			if d.Meta.Pagination.Count != tc.want {
				t.Fatalf("count = %d, want %d", d.Meta.Pagination.Count, tc.want)
			}
			if len(d.Data) != min(10, tc.want) {
				t.Fatalf("%d on the first page", len(d.Data))
			}
		})
	}

	t.Run("finding attributes and record", func(t *testing.T) {
		d := a.list(prefix, "filter[search]="+firstUID)
		f := d.Data[0]
		want := []string{"check_id", "ingestion_id", "inserted_at", "mute", "muted", "provider_type", "provider_uid", "region", "resource_uid",
			"scan_id", "severity", "severity_id", "status", "status_code", "time", "title", "uid", "updated_at"}
		if f.Type != "findings" || !slices.Equal(keys(f.Attributes), want) {
			t.Fatalf("listed finding = %+v", f)
		}
		// The file labels its first record Critical with severity_id 1: the
		// caption decides the pair, and the record keeps what was sent.
		if str(recs[0], "severity") != "Critical" || recs[0]["severity_id"] != float64(1) {
			t.Fatalf("the fixture's first record is %v/%v; this test expects Critical/1", recs[0]["severity"], recs[0]["severity_id"])
		}
		at := f.Attributes
		if at["uid"] != firstUID || at["check_id"] != check || at["scan_id"] != scan || at["ingestion_id"] == "" ||
			at["provider_type"] != "aws" || at["provider_uid"] != "123456789012" || at["region"] != region ||
			at["severity"] != "critical" || at["severity_id"] != float64(5) ||
			at["status_code"] != str(recs[0], "status_code") || at["status"] != str(recs[0], "status") ||
			at["title"] != str(recs[0], "finding_info", "title") {
			t.Fatalf("attributes = %v", at)
		}
		one := a.one(prefix+"/"+f.ID, "")
		// A single finding adds its record and what its page shows.
		withRec := append(slices.Clone(want), "record", "description", "description_html", "risk", "risk_html",
			"remediation", "related_urls", "resource", "account")
		sort.Strings(withRec)
		if one.Data.Type != "findings" || one.Data.ID != f.ID || !slices.Equal(keys(one.Data.Attributes), withRec) {
			t.Fatalf("single finding keys = %v", keys(one.Data.Attributes))
		}
		if !reflect.DeepEqual(normJSON(t, one.Data.Attributes["record"]), normJSON(t, recs[0])) {
			t.Fatal("the record differs from the uploaded one")
		}
		if one.Data.Links["self"] != a.url+prefix+"/"+f.ID {
			t.Fatalf("self = %v", one.Data.Links)
		}
		trimmed := a.one(prefix+"/"+f.ID, "fields[findings]=uid,severity")
		if !slices.Equal(keys(trimmed.Data.Attributes), []string{"severity", "uid"}) {
			t.Fatalf("trimmed = %v", trimmed.Data.Attributes)
		}
		withRecord := a.list(prefix, "filter[search]="+firstUID+"&fields[findings]=record")
		if !slices.Equal(keys(withRecord.Data[0].Attributes), []string{"record"}) {
			t.Fatalf("fields=record gave %v", keys(withRecord.Data[0].Attributes))
		}
	})

	for _, key := range []string{"time", "severity_id", "inserted_at", "check_id", "uid"} {
		for _, k := range []string{key, "-" + key} {
			t.Run("sort="+k, func(t *testing.T) {
				d := a.list(prefix, "filter[scan]="+scan+"&page[size]=100&page[number]=3&sort="+k)
				if len(d.Data) != 100 {
					t.Fatalf("%d findings", len(d.Data))
				}
				for i := 1; i < len(d.Data); i++ {
					c := compareAttr(d.Data[i-1].Attributes[key], d.Data[i].Attributes[key])
					if strings.HasPrefix(k, "-") {
						c = -c
					}
					// Ties are broken in the direction of the sort key:
					// a check's and a severity's by insertion time
					// first, then every key's by uid.
					tie := strings.Compare(d.Data[i-1].Attributes["uid"].(string), d.Data[i].Attributes["uid"].(string))
					if key == "check_id" || key == "severity_id" {
						if c := compareAttr(d.Data[i-1].Attributes["inserted_at"], d.Data[i].Attributes["inserted_at"]); c != 0 {
							tie = c
						}
					}
					if strings.HasPrefix(k, "-") {
						tie = -tie
					}
					if c > 0 || c == 0 && tie >= 0 {
						t.Fatalf("rows %d and %d are out of order for %s: %v, %v", i-1, i, k, d.Data[i-1].Attributes[key], d.Data[i].Attributes[key])
					}
				}
			})
		}
	}
	t.Run("default sort is newest first", func(t *testing.T) {
		d := a.list(prefix, "page[size]=100")
		for i := 1; i < len(d.Data); i++ {
			if compareAttr(d.Data[i-1].Attributes["inserted_at"], d.Data[i].Attributes["inserted_at"]) < 0 {
				t.Fatalf("row %d is newer than row %d", i, i-1)
			}
		}
	})
	t.Run("pages", func(t *testing.T) {
		d := a.list(prefix, "filter[scan]="+scan)
		if p := d.Meta.Pagination; len(d.Data) != 10 || p.Pages != 150 || p.Count != 1500 || d.Links.Next == nil || d.Links.Prev != nil {
			t.Fatalf("first page: %d, %+v", len(d.Data), *p)
		}
		last := a.list(prefix, "filter[scan]="+scan+"&page[size]=100&page[number]=15")
		if len(last.Data) != 100 || last.Links.Next != nil || last.Links.Prev == nil {
			t.Fatalf("last page: %d", len(last.Data))
		}
		wantError(t, a.get(prefix, "filter[scan]="+scan+"&page[size]=100&page[number]=16"), 404, "not_found", "parameter:page[number]")
	})
	t.Run("400s and 404s", func(t *testing.T) {
		for _, tc := range []struct{ query, param string }{
			{"filter[severity]=severe", "filter[severity]"},
			{"filter[severity__in]=high,,low", "filter[severity__in]"},
			{"filter[severity]=high&filter[severity__in]=low", "filter[severity__in]"},
			{"filter[status_code]=", "filter[status_code]"},
			{"filter[check_id]=", "filter[check_id]"},
			{"filter[provider]=aws", "filter[provider]"},
			{"sort=severity", "sort"},
			{"sort=-uid,title", "sort"},
			{"fields[findings]=uid,raw", "fields[findings]"},
			{"page[size]=500", "page[size]"},
			{"q=x", "q"},
		} {
			wantError(t, a.get(prefix, tc.query), 400, "invalid", "parameter:"+tc.param)
		}
		d := a.list(prefix, "page[size]=1")
		id := d.Data[0].ID
		wantError(t, a.get(prefix+"/"+id, "filter[uid]=x"), 400, "invalid", "parameter:filter[uid]")
		wantError(t, a.get(prefix+"/"+id, "fields[findings]=nope"), 400, "invalid", "parameter:fields[findings]")
		for _, bad := range []string{"00000000-0000-0000-0000-000000000000", "nope", id[:30]} {
			wantError(t, a.get(prefix+"/"+bad, ""), 404, "not_found", "parameter:id", bad)
		}
	})
	t.Run("scans", func(t *testing.T) {
		d := a.list("/api/v1/scans", "")
		for _, s := range d.Data {
			at := s.Attributes
			if s.Type != "scans" || at["trigger"] != "imported" || at["provider_type"] == "" || at["provider_uid"] == "" ||
				at["finding_count"].(float64) < 1 || at["ingestion_id"] == "" {
				t.Fatalf("scan = %+v", s)
			}
		}
		for i := 1; i < len(d.Data); i++ {
			if compareAttr(d.Data[i-1].Attributes["inserted_at"], d.Data[i].Attributes["inserted_at"]) < 0 {
				t.Fatal("scans are not newest first")
			}
		}
		if got := a.list("/api/v1/scans", "sort=-inserted_at&filter[provider_type]=AWS&filter[provider_uid]=123456789012"); got.Meta.Pagination.Count < 1 {
			t.Fatal("no aws scan")
		}
		if got := a.list("/api/v1/scans", "filter[provider_type]=m365"); got.Meta.Pagination.Count != 0 {
			t.Fatal("m365 scans?")
		}
		trimmed := a.list("/api/v1/scans", "fields[scans]=finding_count,trigger")
		if !slices.Equal(keys(trimmed.Data[0].Attributes), []string{"finding_count", "trigger"}) {
			t.Fatalf("trimmed scan = %v", trimmed.Data[0].Attributes)
		}
		for _, tc := range []struct{ query, param string }{
			{"sort=inserted_at", "sort"}, {"sort=provider_type", "sort"}, {"filter[trigger]=imported", "filter[trigger]"},
			{"filter[provider_uid]=", "filter[provider_uid]"}, {"fields[scans]=id", "fields[scans]"}, {"page[number]=9", "page[number]"},
		} {
			r := a.get("/api/v1/scans", tc.query)
			if tc.param == "page[number]" {
				wantError(t, r, 404, "not_found", "parameter:page[number]")
				continue
			}
			wantError(t, r, 400, "invalid", "parameter:"+tc.param)
		}
	})
}

// compareAttr orders two attribute values of the same kind: numbers,
// RFC 3339 times, or strings.
func compareAttr(a, b any) int {
	switch x := a.(type) {
	case float64:
		y := b.(float64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		y := b.(string)
		ta, ea := time.Parse(time.RFC3339Nano, x)
		tb, eb := time.Parse(time.RFC3339Nano, y)
		if ea == nil && eb == nil {
			return ta.Compare(tb)
		}
		return strings.Compare(x, y)
	}
	panic(fmt.Sprintf("cannot compare %T", a))
}
