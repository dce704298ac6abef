package scanner

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OCSFVersion is the OCSF schema version the records follow (metadata.version).
const OCSFVersion = "1.5.0"

// Provider is unmapped.provider of every record.
const Provider = "kubernetes"

// Output formats.
const (
	FormatOCSF = "json-ocsf"
	FormatCSV  = "csv"
)

// Formats lists the supported formats with their file suffixes.
var Formats = map[string]string{FormatOCSF: ".ocsf.json", FormatCSV: ".csv"}

// OCSF record, field for field in the order the reference scanner writes.
type ocsfRecord struct {
	Message      string          `json:"message"`
	Metadata     ocsfMetadata    `json:"metadata"`
	SeverityID   int             `json:"severity_id"`
	Severity     string          `json:"severity"`
	Status       string          `json:"status"`
	StatusCode   string          `json:"status_code"`
	StatusDetail string          `json:"status_detail"`
	StatusID     int             `json:"status_id"`
	Unmapped     ocsfUnmapped    `json:"unmapped"`
	ActivityName string          `json:"activity_name"`
	ActivityID   int             `json:"activity_id"`
	FindingInfo  ocsfFindingInfo `json:"finding_info"`
	Resources    []ocsfResource  `json:"resources"`
	CategoryName string          `json:"category_name"`
	CategoryUID  int             `json:"category_uid"`
	ClassName    string          `json:"class_name"`
	ClassUID     int             `json:"class_uid"`
	Remediation  ocsfRemediation `json:"remediation"`
	RiskDetails  string          `json:"risk_details"`
	Time         int64           `json:"time"`
	TimeDt       string          `json:"time_dt"`
	TypeUID      int             `json:"type_uid"`
	TypeName     string          `json:"type_name"`
}

type ocsfMetadata struct {
	EventCode string      `json:"event_code"`
	Product   ocsfProduct `json:"product"`
	Profiles  []string    `json:"profiles"`
	TenantUID string      `json:"tenant_uid"`
	Version   string      `json:"version"`
}

type ocsfProduct struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	VendorName string `json:"vendor_name"`
	Version    string `json:"version"`
}

type ocsfUnmapped struct {
	RelatedURL     string              `json:"related_url"`
	Categories     []string            `json:"categories"`
	DependsOn      []string            `json:"depends_on"`
	RelatedTo      []string            `json:"related_to"`
	AdditionalURLs []string            `json:"additional_urls"`
	Notes          string              `json:"notes"`
	Compliance     map[string][]string `json:"compliance"`
	Provider       string              `json:"provider"`
	ProviderUID    string              `json:"provider_uid"`
	ScanID         string              `json:"scan_id"`
	ClusterName    string              `json:"cluster_name,omitempty"`
	Context        string              `json:"context,omitempty"`
}

type ocsfFindingInfo struct {
	CreatedTime   int64    `json:"created_time"`
	CreatedTimeDt string   `json:"created_time_dt"`
	Desc          string   `json:"desc"`
	ProductUID    string   `json:"product_uid"`
	Title         string   `json:"title"`
	Types         []string `json:"types"`
	UID           string   `json:"uid"`
}

type ocsfResource struct {
	Data      ocsfResourceData  `json:"data"`
	Group     map[string]string `json:"group"`
	Labels    []string          `json:"labels"`
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Type      string            `json:"type"`
	UID       string            `json:"uid"`
}

type ocsfResourceData struct {
	Details  string         `json:"details"`
	Metadata map[string]any `json:"metadata"`
}

type ocsfRemediation struct {
	Desc       string   `json:"desc"`
	References []string `json:"references"`
}

const productUID = "postctl"

// FindingUID is deterministic per check, cluster and resource, so the same
// problem keeps its uid from one scan to the next. Kind/namespace/name
// rather than the object UID: a workload deleted and re-applied by a
// deployment pipeline is still the same finding.
func FindingUID(checkID, clusterUID string, r Resource) string {
	ns := r.Namespace
	if ns == "" {
		ns = "-"
	}
	return strings.Join([]string{productUID, Provider, checkID, clusterUID, r.Kind, ns, r.Name}, "-")
}

// timeDt is ISO 8601 in UTC, with the microseconds the reference scanner shows.
func timeDt(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func (rep *Report) record(r Result) ocsfRecord {
	c := r.Check
	status := "FAIL"
	if r.Pass {
		status = "PASS"
	}
	compliance := map[string][]string{}
	if len(c.CIS) > 0 {
		compliance["CIS-1.8"] = c.CIS
	}
	labels := []string{}
	for k, v := range r.Resource.Labels {
		labels = append(labels, k+"="+v)
	}
	slices.Sort(labels)
	md := r.Resource.Metadata
	if md == nil {
		md = map[string]any{}
	}
	ts := rep.Time
	related := ""
	if len(c.References) > 0 {
		related = c.References[0]
	}
	return ocsfRecord{
		Message: r.Detail,
		Metadata: ocsfMetadata{
			EventCode: c.ID,
			Product:   ocsfProduct{Name: "postctl", UID: productUID, VendorName: "Posture", Version: ProductVersion()},
			Profiles:  []string{"container", "datetime"},
			Version:   OCSFVersion,
		},
		SeverityID:   int(c.Severity),
		Severity:     c.Severity.Label(),
		Status:       "New",
		StatusCode:   status,
		StatusDetail: r.Detail,
		StatusID:     1,
		Unmapped: ocsfUnmapped{
			RelatedURL: related, Categories: nonNil(c.Categories), DependsOn: []string{}, RelatedTo: []string{},
			AdditionalURLs: nonNil(c.References[min(1, len(c.References)):]), Compliance: compliance,
			Provider: Provider, ProviderUID: rep.Cluster.UID, ScanID: rep.ScanID,
			ClusterName: rep.Cluster.Name, Context: rep.Cluster.Context,
		},
		ActivityName: "Create",
		ActivityID:   1,
		FindingInfo: ocsfFindingInfo{
			CreatedTime: ts.Unix(), CreatedTimeDt: timeDt(ts), Desc: c.Description, ProductUID: productUID,
			Title: c.Title, Types: nonNil(c.Categories), UID: FindingUID(c.ID, rep.Cluster.UID, r.Resource),
		},
		Resources: []ocsfResource{{
			Data:  ocsfResourceData{Details: r.Detail, Metadata: md},
			Group: map[string]string{"name": c.Group}, Labels: labels,
			Name: r.Resource.Name, Namespace: r.Resource.Namespace, Type: r.Resource.Kind, UID: string(r.Resource.UID),
		}},
		CategoryName: "Findings",
		CategoryUID:  2,
		ClassName:    "Detection Finding",
		ClassUID:     2004,
		Remediation:  ocsfRemediation{Desc: c.Remediation, References: nonNil(c.References)},
		RiskDetails:  c.Risk,
		Time:         ts.Unix(),
		TimeDt:       timeDt(ts),
		TypeUID:      200401,
		TypeName:     "Detection Finding: Create",
	}
}

// WriteOCSF writes the report as a JSON array of OCSF Detection Findings.
// Records are encoded one at a time, so memory does not grow with the file.
func (rep *Report) WriteOCSF(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString("["); err != nil {
		return err
	}
	for i, r := range rep.Results {
		b, err := json.MarshalIndent(rep.record(r), "  ", "  ")
		if err != nil {
			return fmt.Errorf("encoding the finding of %s on %s: %w", r.Check.ID, r.Resource.Ref(), err)
		}
		sep := "\n  "
		if i > 0 {
			sep = ",\n  "
		}
		if _, err := bw.WriteString(sep); err != nil {
			return err
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	if _, err := bw.WriteString("\n]\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// CSVHeader is the first row of the CSV output.
var CSVHeader = []string{
	"timestamp", "scan_id", "provider", "provider_uid", "cluster_name", "check_id", "check_title", "severity",
	"status", "status_extended", "resource_type", "namespace", "resource_name", "resource_uid",
	"finding_uid", "risk", "remediation", "compliance",
}

// WriteCSV writes one row per result (RFC 4180, comma-separated).
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, r := range rep.Results {
		c := r.Check
		status := "FAIL"
		if r.Pass {
			status = "PASS"
		}
		var compliance string
		if len(c.CIS) > 0 {
			compliance = "CIS-1.8: " + strings.Join(c.CIS, " ")
		}
		row := []string{
			timeDt(rep.Time), rep.ScanID, Provider, rep.Cluster.UID, rep.Cluster.Name, c.ID, c.Title, c.Severity.Label(),
			status, r.Detail, r.Resource.Kind, r.Resource.Namespace, r.Resource.Name, string(r.Resource.UID),
			FindingUID(c.ID, rep.Cluster.UID, r.Resource), c.Risk, c.Remediation, compliance,
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Write writes the report in one format to path, through a temporary file
// in the same directory so an interrupted scan never leaves half a report.
func (rep *Report) Write(format, path string) error {
	var write func(io.Writer) error
	switch format {
	case FormatOCSF:
		write = rep.WriteOCSF
	case FormatCSV:
		write = rep.WriteCSV
	default:
		return fmt.Errorf("unknown output format %q (supported: %s, %s)", format, FormatOCSF, FormatCSV)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Summary counts results per check.
type Summary struct {
	Check      *Check
	Pass, Fail int
}

// Summaries is one line per check that ran, in check order.
func (rep *Report) Summaries() []Summary {
	var out []Summary
	idx := map[string]int{}
	for _, r := range rep.Results {
		i, ok := idx[r.Check.ID]
		if !ok {
			i = len(out)
			idx[r.Check.ID] = i
			out = append(out, Summary{Check: r.Check})
		}
		if r.Pass {
			out[i].Pass++
		} else {
			out[i].Fail++
		}
	}
	return out
}

// SeverityCounts counts failures per severity label, most severe first.
func (rep *Report) SeverityCounts() string {
	counts := map[Severity]int{}
	for _, r := range rep.Results {
		if !r.Pass {
			counts[r.Check.Severity]++
		}
	}
	var parts []string
	for _, s := range []Severity{Critical, High, Medium, Low, Informational} {
		if counts[s] > 0 {
			parts = append(parts, strconv.Itoa(counts[s])+" "+strings.ToLower(s.Label()))
		}
	}
	return strings.Join(parts, ", ")
}
