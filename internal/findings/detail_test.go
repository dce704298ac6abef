package findings

import (
	"reflect"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
)

func TestDetailOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   string
		check func(t *testing.T, d Detail)
	}{
		{"prowler record", `{"finding_info":{"desc":"Check **x**","uid":"u"},"risk_details":"Risk of x",
			"remediation":{"desc":"Run it","references":["aws x create-analyzer --name <NAME>","https://docs.example/x","https://docs.example/x",""]},
			"unmapped":{"related_url":"https://docs.example/x","additional_urls":["http://more.example/"]},
			"resources":[{"cloud_partition":"aws","region":"us-east-1","labels":["env=prod",{"k":"v"}],"name":"bucket-1","type":"AwsS3Bucket","uid":"arn:aws:s3:::bucket-1"}],
			"cloud":{"account":{"name":"Production","uid":"123456789012"}}}`,
			func(t *testing.T, d Detail) {
				want := Detail{Description: "Check **x**", DescriptionHTML: "<p>Check <strong>x</strong></p>\n",
					Risk: "Risk of x", RiskHTML: "<p>Risk of x</p>\n",
					Remediation: restapi.FindingRemediation{Description: "Run it", DescriptionHTML: "<p>Run it</p>\n", References: []restapi.Link{
						{Text: "aws x create-analyzer --name <NAME>"}, {Text: "https://docs.example/x", Href: "https://docs.example/x"}}},
					RelatedURLs: []restapi.Link{{Text: "https://docs.example/x", Href: "https://docs.example/x"}, {Text: "http://more.example/", Href: "http://more.example/"}},
					Resource: restapi.FindingResource{UID: "arn:aws:s3:::bucket-1", Name: "bucket-1", Type: "AwsS3Bucket", Region: "us-east-1",
						Partition: "aws", Labels: []string{"env=prod", `{"k":"v"}`}},
					Account: restapi.FindingAccount{Provider: "aws", UID: "123456789012", Name: "Production"}}
				if !reflect.DeepEqual(d, want) {
					t.Errorf("DetailOf =\n%+v\nwant\n%+v", d, want)
				}
			}},
		{"hostile texts", `{"finding_info":{"desc":"<script>window.pwned=1</script>[x](javascript:alert(1))"},
			"risk_details":"<img src=x onerror=alert(1)>","remediation":{"desc":"[d](data:text/html,x)","references":["javascript:alert(1)"]},
			"unmapped":{"related_url":"javascript:alert(2)"}}`,
			func(t *testing.T, d Detail) {
				for _, h := range []string{d.DescriptionHTML, d.RiskHTML, d.Remediation.DescriptionHTML} {
					for _, bad := range []string{"<script", "<img", "onerror", "javascript:", "data:", "<a"} {
						if strings.Contains(h, bad) {
							t.Errorf("rendered %q holds %q", h, bad)
						}
					}
				}
				if d.Remediation.References[0].Href != "" || d.RelatedURLs[0].Href != "" {
					t.Errorf("a javascript: reference got an href: %+v %+v", d.Remediation.References, d.RelatedURLs)
				}
			}},
		{"fields of other shapes and none", `{"finding_info":"x","remediation":{"references":"https://x.example"},"resources":{}}`,
			func(t *testing.T, d Detail) {
				want := Detail{Remediation: restapi.FindingRemediation{References: []restapi.Link{}}, RelatedURLs: []restapi.Link{},
					Resource: restapi.FindingResource{UID: "arn:fallback", Labels: []string{}}, Account: restapi.FindingAccount{Provider: "aws", UID: "123456789012"}}
				if !reflect.DeepEqual(d, want) {
					t.Errorf("DetailOf =\n%+v\nwant\n%+v", d, want)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DetailOf(&store.Finding{ID: "f1", ProviderType: "aws", ProviderUID: "123456789012", ResourceUID: "arn:fallback", Raw: []byte(tc.raw)})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
	if _, err := DetailOf(&store.Finding{ID: "f2", Raw: []byte(`[1]`)}); err == nil || !strings.Contains(err.Error(), "finding f2") {
		t.Errorf("DetailOf of a record that is not an object: error %v; want one naming finding f2", err)
	}
}
