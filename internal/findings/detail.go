package findings

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/posture-dev/posture/internal/markdown"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
)

// Detail is what a finding's page shows beyond its indexed columns, read
// from its OCSF record: the REST API's finding attributes of the same
// names, which the UI and the MCP server read.
type Detail struct {
	Description     string
	DescriptionHTML string
	Risk            string
	RiskHTML        string
	Remediation     restapi.FindingRemediation
	RelatedURLs     []restapi.Link
	Resource        restapi.FindingResource
	Account         restapi.FindingAccount
}

// detailRecord is the part of an OCSF Detection Finding the page reads.
// Labels are read as raw JSON: OCSF says strings, and a producer that
// writes anything else still gets its labels shown, as their JSON text.
type detailRecord struct {
	FindingInfo struct {
		Desc string `json:"desc"`
	} `json:"finding_info"`
	RiskDetails string `json:"risk_details"`
	Remediation struct {
		Desc       string   `json:"desc"`
		References []string `json:"references"`
	} `json:"remediation"`
	Unmapped struct {
		RelatedURL     string   `json:"related_url"`
		AdditionalURLs []string `json:"additional_urls"`
	} `json:"unmapped"`
	Resources []struct {
		UID       string            `json:"uid"`
		Name      string            `json:"name"`
		Type      string            `json:"type"`
		Region    string            `json:"region"`
		Partition string            `json:"cloud_partition"`
		Labels    []json.RawMessage `json:"labels"`
	} `json:"resources"`
	Cloud struct {
		Account struct {
			Name string `json:"name"`
		} `json:"account"`
	} `json:"cloud"`
}

// DetailOf reads f's record. The record was validated at ingestion, but
// only the fields a finding must have: any of these may be missing or of
// another type, which leaves it empty rather than failing the page. An
// error is only a record that is not JSON at all, or Markdown that
// cannot be rendered.
func DetailOf(f *store.Finding) (Detail, error) {
	var rec detailRecord
	if len(f.Raw) > 0 {
		// Decode field by field so that one field of an unexpected type
		// leaves that field empty, not the whole detail.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(f.Raw, &top); err != nil {
			return Detail{}, fmt.Errorf("finding %s: its stored record is not a JSON object: %w", f.ID, err)
		}
		for name, dst := range map[string]any{"finding_info": &rec.FindingInfo, "risk_details": &rec.RiskDetails,
			"remediation": &rec.Remediation, "unmapped": &rec.Unmapped, "resources": &rec.Resources, "cloud": &rec.Cloud} {
			if raw, ok := top[name]; ok {
				_ = json.Unmarshal(raw, dst) // a field of another shape is left empty (see above)
			}
		}
	}
	d := Detail{
		Description: rec.FindingInfo.Desc,
		Risk:        rec.RiskDetails,
		Remediation: restapi.FindingRemediation{Description: rec.Remediation.Desc, References: links(rec.Remediation.References)},
		RelatedURLs: links(append([]string{rec.Unmapped.RelatedURL}, rec.Unmapped.AdditionalURLs...)),
		Resource:    restapi.FindingResource{UID: f.ResourceUID, Labels: []string{}},
		Account:     restapi.FindingAccount{Provider: f.ProviderType, UID: f.ProviderUID, Name: rec.Cloud.Account.Name},
	}
	if len(rec.Resources) > 0 {
		r := rec.Resources[0]
		d.Resource.Name, d.Resource.Type, d.Resource.Region, d.Resource.Partition = r.Name, r.Type, r.Region, r.Partition
		if r.UID != "" {
			d.Resource.UID = r.UID
		}
		for _, l := range r.Labels {
			var s string
			if json.Unmarshal(l, &s) != nil {
				s = string(l)
			}
			d.Resource.Labels = append(d.Resource.Labels, s)
		}
	}
	var err error
	for _, m := range []struct {
		what string
		src  string
		dst  *string
	}{
		{"finding_info.desc", d.Description, &d.DescriptionHTML},
		{"risk_details", d.Risk, &d.RiskHTML},
		{"remediation.desc", d.Remediation.Description, &d.Remediation.DescriptionHTML},
	} {
		if *m.dst, err = markdown.HTML(m.src); err != nil {
			return Detail{}, fmt.Errorf("finding %s: %s: %w", f.ID, m.what, err)
		}
	}
	return d, nil
}

// links turns a report's references into links, dropping empty and
// repeated entries; only an http or https URL gets an href.
func links(refs []string) []restapi.Link {
	out := []restapi.Link{}
	seen := map[string]bool{}
	for _, r := range refs {
		r = strings.TrimSpace(r)
		if r == "" || seen[r] {
			continue
		}
		seen[r] = true
		out = append(out, restapi.Link{Text: r, Href: markdown.SafeURL(r)})
	}
	return out
}
