package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/store"
)

// TestGetFindingIsItsPage: get_finding answers what the web UI's finding
// page shows (the REST API's page attributes, Markdown as written) and the
// finding's observations across scans, newest first.
func TestGetFindingIsItsPage(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	raw := []byte(`{"class_uid":2004,"finding_info":{"uid":"u-1","desc":"## Why\n\n- a"},"risk_details":"Risk **high**",
		"remediation":{"desc":"1. fix","references":["https://docs.example.org/fix","aws s3 fix"]},
		"unmapped":{"related_url":"https://related.example.org/"},
		"resources":[{"uid":"arn:aws:s3:::b","name":"b","type":"AwsS3Bucket","region":"eu-west-1","cloud_partition":"aws","labels":["env=prod"]}],
		"cloud":{"account":{"name":"Production","uid":"111111111111"}}}`)
	for i, scan := range []struct{ id, status string }{{"scan-old", "FAIL"}, {"scan-new", "PASS"}} {
		f := store.Finding{UID: "u-1", ScanID: scan.id, CheckID: "check_1", Title: "Bucket b", Severity: "high", SeverityID: 4,
			StatusCode: scan.status, ProviderType: "aws", ProviderUID: "111111111111", ResourceUID: "arn:aws:s3:::b",
			Time: time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC), Raw: raw}
		ing := "ing-" + scan.id
		if err := env.Store.StartRun(ctx, env.Tenant, ing, 1, 1); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.WriteBatch(ctx, env.Tenant, ing, 1, store.Batch{Findings: []store.Finding{f},
			Scans: []store.Scan{{ID: scan.id, ProviderType: "aws", ProviderUID: "111111111111", Trigger: "imported"}}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.FinishRun(ctx, env.Tenant, ing, 1, store.Outcome{Status: store.RunSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	cs := inMemoryClient(t, env.URL, env.APIKey)
	type link struct{ Text, Href string }
	var got struct {
		Description     string  `json:"description"`
		DescriptionHTML *string `json:"description_html"`
		Risk            string  `json:"risk"`
		Remediation     map[string]any
		RelatedURLs     []link `json:"related_urls"`
		Resource        struct {
			Name, Type, Region, Partition, UID string
			Labels                             []string
		}
		Account          struct{ Provider, UID, Name string }
		Observations     []map[string]any `json:"observations"`
		ObservationCount int              `json:"observation_count"`
		Record           map[string]any   `json:"record"`
	}
	for _, include := range []bool{true, false} {
		id := store.FindingID(env.Tenant, "scan-new", "u-1")
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "get_finding", Arguments: map[string]any{"id": id, "include_record": include}})
		if err != nil || res.IsError {
			t.Fatalf("get_finding: %v %+v", err, res)
		}
		got.Record = nil
		if err := json.Unmarshal([]byte(res.Content[0].(*mcpsdk.TextContent).Text), &got); err != nil {
			t.Fatal(err)
		}
		if got.Description != "## Why\n\n- a" || got.DescriptionHTML != nil || got.Risk != "Risk **high**" {
			t.Errorf("description %q (html %v), risk %q: want the Markdown as written, and no HTML", got.Description, got.DescriptionHTML, got.Risk)
		}
		refs, _ := json.Marshal(got.Remediation["references"])
		if got.Remediation["description"] != "1. fix" || got.Remediation["description_html"] != nil ||
			string(refs) != `[{"href":"https://docs.example.org/fix","text":"https://docs.example.org/fix"},{"text":"aws s3 fix"}]` {
			t.Errorf("remediation %v", got.Remediation)
		}
		if len(got.RelatedURLs) != 1 || got.RelatedURLs[0].Href != "https://related.example.org/" {
			t.Errorf("related_urls %+v", got.RelatedURLs)
		}
		if got.Resource.Name != "b" || got.Resource.Partition != "aws" || got.Resource.UID != "arn:aws:s3:::b" || len(got.Resource.Labels) != 1 ||
			got.Account.Name != "Production" || got.Account.UID != "111111111111" {
			t.Errorf("resource %+v, account %+v", got.Resource, got.Account)
		}
		if got.ObservationCount != 2 || len(got.Observations) != 2 || got.Observations[0]["id"] != id ||
			got.Observations[0]["status_code"] != "PASS" || got.Observations[1]["scan_id"] != "scan-old" || got.Observations[1]["status_code"] != "FAIL" {
			t.Errorf("observations %v (count %d); want scan-new PASS, then scan-old FAIL", got.Observations, got.ObservationCount)
		}
		if (got.Record != nil) != include {
			t.Errorf("include_record %v: record %v", include, got.Record != nil)
		}
	}
}
