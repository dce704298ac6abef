package webhook_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/restapi"
)

// TestFindingPageREST: GET /findings/{id} carries what a finding's page
// shows, its Markdown rendered to sanitized HTML; /observations lists the
// same finding across the tenant's scans, newest first, and neither shows
// another tenant anything.
func TestFindingPageREST(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	demo, other := te.as(t, te.key("demo-admin")), te.as(t, te.key("other-admin"))
	first, second, uid := findingPageReport(t)
	for _, up := range []struct {
		a    *api
		name string
		body []byte
	}{{demo, "first.ocsf.json", first}, {demo, "second.ocsf.json", second}, {other, "other.ocsf.json", first}} {
		if _, status, _ := up.a.ingest(up.name, up.body); status != "completed" {
			t.Fatalf("%s ended %s", up.name, status)
		}
	}
	found := demo.list("/api/v1/findings", queryOf("filter[search]", uid, "sort", "-time"))
	if len(found.Data) != 2 {
		t.Fatalf("%d findings of %s; want 2", len(found.Data), uid)
	}
	newest, oldest := found.Data[0].ID, found.Data[1].ID

	t.Run("the page's fields", func(t *testing.T) {
		r := demo.get("/api/v1/findings/"+newest, "")
		var doc restapi.ResourceDocument[restapi.Finding]
		decode(t, r, &doc)
		f := doc.Data.Attributes
		if f.Description != hostileMarkdown {
			t.Errorf("description %q; want the Markdown as written", f.Description)
		}
		for what, h := range map[string]string{"description_html": f.DescriptionHTML, "risk_html": f.RiskHTML, "remediation.description_html": f.Remediation.DescriptionHTML} {
			for _, bad := range []string{"<script", "<img", "<iframe", "<svg", "onerror", "onclick", "onmouseover", "onload", "javascript:", "data:"} {
				if strings.Contains(strings.ToLower(h), bad) {
					t.Errorf("%s holds %q: %s", what, bad, h)
				}
			}
		}
		for _, want := range []string{"<h2>Why it matters</h2>", "<strong>point</strong>", `<a href="https://docs.example.org/guide" rel="nofollow noreferrer noopener" target="_blank">good link</a>`} {
			if !strings.Contains(f.DescriptionHTML, want) {
				t.Errorf("description_html lacks %s: %s", want, f.DescriptionHTML)
			}
		}
		if !strings.Contains(f.Remediation.DescriptionHTML, "<ol>") {
			t.Errorf("remediation's steps are not a list: %s", f.Remediation.DescriptionHTML)
		}
		wantRefs := []restapi.Link{{Text: "https://docs.example.org/fix", Href: "https://docs.example.org/fix"},
			{Text: "javascript:window.pwned=10"}, {Text: "aws s3api put-public-access-block --bucket b"}}
		if got, _ := json.Marshal(f.Remediation.References); string(got) != string(must(json.Marshal(wantRefs))) {
			t.Errorf("references %s; want %s", got, must(json.Marshal(wantRefs)))
		}
		if len(f.RelatedURLs) != 1 || f.RelatedURLs[0].Href != "https://related.example.org/page" {
			t.Errorf("related_urls %+v", f.RelatedURLs)
		}
		if f.Resource == nil || f.Resource.UID != f.ResourceUID || f.Resource.Partition != "aws" || f.Resource.Name == "" ||
			strings.Join(f.Resource.Labels, ",") != "env=prod,team=payments" {
			t.Errorf("resource %+v (resource_uid %s)", f.Resource, f.ResourceUID)
		}
		if f.Account == nil || *f.Account != (restapi.FindingAccount{Provider: "aws", UID: "123456789012", Name: "Test AWS Account"}) {
			t.Errorf("account %+v", f.Account)
		}
		sparse := demo.one("/api/v1/findings/"+newest, "fields[findings]=resource,risk_html").Data.Attributes
		if len(sparse) != 2 || sparse["resource"] == nil || sparse["risk_html"] == nil {
			t.Errorf("fields[findings]=resource,risk_html gave %v", sparse)
		}
		if listed := demo.list("/api/v1/findings", queryOf("filter[search]", uid)).Data[0].Attributes; listed["description_html"] != nil {
			t.Error("a listing sends the page's fields without fields[findings] naming them")
		}
	})

	t.Run("observations across scans", func(t *testing.T) {
		for _, id := range []string{newest, oldest} {
			d := demo.list("/api/v1/findings/"+id+"/observations", "")
			if got := strings.Join(d.ids(), ","); got != newest+","+oldest || d.Meta.Pagination.Count != 2 {
				t.Fatalf("observations of %s: %s (count %d); want %s,%s", id, got, d.Meta.Pagination.Count, newest, oldest)
			}
			if a := d.Data[0].Attributes; a["status_code"] != "PASS" || d.Data[1].Attributes["status_code"] != "FAIL" ||
				a["scan_id"] == d.Data[1].Attributes["scan_id"] || a["time"] == nil || a["ingestion_id"] == nil {
				t.Errorf("observations' attributes: %v then %v", a, d.Data[1].Attributes)
			}
		}
		page2 := demo.list("/api/v1/findings/"+newest+"/observations", "page[size]=1&page[number]=2&fields[findings]=status_code")
		if strings.Join(page2.ids(), ",") != oldest || len(page2.Data[0].Attributes) != 1 || page2.Links.Next != nil {
			t.Errorf("page 2 of 1: %v %v", page2.ids(), page2.Data[0].Attributes)
		}
		wantError(t, demo.get("/api/v1/findings/"+newest+"/observations", "fields[findings]=record"), 400, "invalid", "parameter:fields[findings]")
		wantError(t, demo.get("/api/v1/findings/"+newest+"/observations", "page[number]=3&page[size]=1"), 404, "not_found", "parameter:page[number]")
	})

	t.Run("another tenant's finding is not found", func(t *testing.T) {
		mine := other.list("/api/v1/findings", queryOf("filter[search]", uid))
		if len(mine.Data) != 1 {
			t.Fatalf("the other tenant holds %d findings of %s; want 1", len(mine.Data), uid)
		}
		if d := other.list("/api/v1/findings/"+mine.Data[0].ID+"/observations", ""); d.Meta.Pagination.Count != 1 {
			t.Errorf("the other tenant's finding is seen in %d scans; want its own 1", d.Meta.Pagination.Count)
		}
		for _, path := range []string{"/api/v1/findings/" + newest, "/api/v1/findings/" + newest + "/observations"} {
			wantError(t, other.get(path, ""), 404, "not_found", "parameter:id")
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
