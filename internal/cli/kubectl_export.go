package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/internal/store"
)

// exportChunk is the plugin's page while exporting: the aggregated API's
// largest (aggregated.MaxListLimit).
const exportChunk = 1000

func (k *kubectlPlugin) exportCommand() *cobra.Command {
	var e exportFlags
	var fieldSelector string
	var chunk int64
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a tenant namespace's findings as CSV or OCSF JSON",
		Long: `Writes every finding that get findings would list (the current state, or with --history every
finding stored; --field-selector as for get) as one file: --format csv (the REST export's columns,
docs/api.md) or --format ocsf (the records as uploaded, a JSON array that push takes back). It pages
through the aggregated API's list of findings (limit/continue; for OCSF with includeRecords=true), so it
needs only list on findings, each request is short, and one page is held at a time. Output goes to
standard output, or to --output-file once the export is whole; a failure midway is exit 1.`,
		Example: `  kubectl posture export -n tenant-acme --field-selector statusCode=FAIL > failing.csv
  kubectl posture export -n tenant-acme --history --format ocsf --output-file all.ocsf.json`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := e.check()
			if err != nil {
				return err
			}
			if chunk <= 0 || chunk > exportChunk {
				return usageError{fmt.Errorf("--chunk-size must be from 1 to %d", exportChunk)}
			}
			c, err := k.client()
			if err != nil {
				return err
			}
			sel := findingsSelector(fieldSelector, e.history)
			current := strings.Contains(","+strings.ReplaceAll(sel, " ", "")+",", ","+latestSelector+"=true,")
			out, err := k.openOutput(e.file)
			if err != nil {
				return err
			}
			x := export.NewWriter(out, format, current)
			err = k.exportPages(cmd.Context(), c, sel, chunk, x)
			if err == nil {
				err = x.Close()
			}
			if err = out.finish(err); err != nil {
				return exit(ExitError, "export findings of namespace %s after %d written: %v", c.namespace, x.Count(), err)
			}
			return nil
		},
	}
	e.register(cmd)
	cmd.Flags().StringVar(&fieldSelector, "field-selector", "", "filter by fields, e.g. severity=High,statusCode=FAIL (docs/kubernetes-api.md lists them)")
	cmd.Flags().Int64Var(&chunk, "chunk-size", exportChunk, "findings fetched per request (limit/continue)")
	return cmd
}

// exportPages lists the findings page by page and writes each page before
// asking for the next.
func (k *kubectlPlugin) exportPages(ctx context.Context, c *kube, sel string, chunk int64, x *export.Writer) error {
	path := dataGroupPath + "/namespaces/" + url.PathEscape(c.namespace) + "/findings"
	q := url.Values{"limit": {fmt.Sprint(chunk)}}
	if sel != "" {
		q.Set("fieldSelector", sel)
	}
	ocsf := x.Format() == export.OCSF
	if ocsf {
		q.Set(datav1.IncludeRecordsParam, "true")
	}
	for {
		data, err := c.do(ctx, http.MethodGet, path, q, "application/json", nil, 0)
		if err != nil {
			return err
		}
		var page struct {
			Metadata metav1.ListMeta  `json:"metadata"`
			Items    []datav1.Finding `json:"items"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return fmt.Errorf("the answer is not a list of findings: %w", err)
		}
		for i := range page.Items {
			f := storeFinding(&page.Items[i])
			if ocsf && len(f.Raw) == 0 {
				return fmt.Errorf("the aggregated API sent finding %s without its record: it predates %s; upgrade the manager", f.ID, datav1.IncludeRecordsParam)
			}
			if err := x.Write(&f); err != nil {
				return err
			}
		}
		if err := x.Flush(); err != nil {
			return err
		}
		if page.Metadata.Continue == "" {
			return nil
		}
		q.Set("continue", page.Metadata.Continue)
	}
}

// storeFinding is the finding an aggregated API item describes, in the
// form the export writer takes: the same cells the REST export writes.
func storeFinding(f *datav1.Finding) store.Finding {
	out := store.Finding{
		ID: f.Name, UID: f.UID, ScanID: f.Scan, IngestionID: f.Ingestion, CheckID: f.CheckID, Title: f.Title,
		Severity: f.Severity, SeverityID: f.SeverityID, StatusCode: f.StatusCode, Status: f.Status, Region: f.Region,
		ProviderType: f.ProviderType, ProviderUID: f.ProviderUID, ResourceUID: f.ResourceUID,
		Time: f.Time.Time, InsertedAt: f.CreationTimestamp.Time, UpdatedAt: f.UpdatedAt.Time, Delta: f.Delta,
	}
	if f.FirstSeenAt != nil {
		t := f.FirstSeenAt.Time
		out.FirstSeenAt = &t
	}
	if f.Record != nil {
		out.Raw = f.Record.Raw
	}
	return out
}
