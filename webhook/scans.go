package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingestions"
	"github.com/posture-dev/posture/internal/store"
)

var scanList = listSpec{
	resourceType: "scans",
	filters:      set("provider_type", "provider_uid"),
	// The store lists scans newest first only; the key is still accepted so
	// that clients can say what they rely on.
	sortKeys:    set("inserted_at"),
	defaultSort: []string{"-inserted_at"},
	fields: set("trigger", "provider_type", "provider_uid", "ingestion_id", "finding_count", "inserted_at", "updated_at",
		"scanned_at", "fail_count", "fail_counts", "file_name", "uploaded_by", "source"),
}

func (s *Server) scanRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/scans", s.methods(map[string]handlerFunc{http.MethodGet: s.listScans}))
}

// listScans is GET /api/v1/scans: the scanner runs findings came from, one
// per unmapped.scan_id, or one per ingestion and provider without it.
func (s *Server) listScans(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	q, aerr := parseList(r, scanList)
	if aerr != nil {
		return aerr
	}
	if len(q.sort) != 1 || q.sort[0] != "-inserted_at" {
		return newError(400, CodeInvalid, "scans are listed newest first only: sort=-inserted_at").parameter("sort")
	}
	for key, v := range q.filters {
		if v == "" {
			return errorf(400, CodeInvalid, "filter[%s] must not be empty", key).parameter("filter[" + key + "]")
		}
	}
	rows, count, err := s.Store.ListScans(r.Context(), p.Tenant, store.ScanQuery{
		ProviderType: q.filters["provider_type"],
		ProviderUID:  q.filters["provider_uid"],
		Page:         store.Page{Number: q.page, Size: q.size},
	})
	if err != nil {
		return err
	}
	pg, links, aerr := pageOf(r, q, count)
	if aerr != nil {
		return aerr
	}
	reports, err := s.scanReports(r.Context(), p.Namespace, rows)
	if err != nil {
		return err
	}
	data := make([]resource, 0, len(rows))
	for _, sc := range rows {
		var scanned any
		if !sc.ScannedAt.IsZero() {
			scanned = sc.ScannedAt.UTC().Format(time.RFC3339Nano)
		}
		failing := map[string]int{}
		total := 0
		for severity, n := range sc.Failing {
			failing[severity] = n
			total += n
		}
		rep := reports[sc.IngestionID]
		attrs := map[string]any{
			"trigger":       sc.Trigger,
			"provider_type": sc.ProviderType,
			"provider_uid":  sc.ProviderUID,
			"ingestion_id":  sc.IngestionID,
			"finding_count": sc.FindingCount,
			"inserted_at":   sc.InsertedAt.UTC().Format(time.RFC3339Nano),
			"updated_at":    sc.UpdatedAt.UTC().Format(time.RFC3339Nano),
			"scanned_at":    scanned,
			"fail_count":    total,
			"fail_counts":   failing,
			"file_name":     nullable(rep.fileName),
			"uploaded_by":   nullable(rep.uploadedBy),
			"source":        nullable(rep.source),
		}
		trim(attrs, q.fields)
		findings := "/api/v1/findings?" + url.Values{"filter[scan]": {sc.ID}}.Encode()
		data = append(data, resource{Type: "scans", ID: sc.ID, Attributes: attrs,
			Links: map[string]any{"findings": absoluteURL(r, mustURL(findings))}})
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
}

// scanReport is what a scan's list entry says of the report it came from.
type scanReport struct{ fileName, uploadedBy, source string }

// scanReports reads, from the manager's cache, the Ingestions that last
// wrote the scans: the report's file name, who submitted it and how. An
// Ingestion deleted since leaves its scans' entries empty (null).
func (s *Server) scanReports(ctx context.Context, ns string, scans []store.Scan) (map[string]scanReport, error) {
	out := map[string]scanReport{}
	for _, sc := range scans {
		if sc.IngestionID == "" {
			continue
		}
		if _, seen := out[sc.IngestionID]; seen {
			continue
		}
		var ing posturev1.Ingestion
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sc.IngestionID}, &ing)
		switch {
		case apierrors.IsNotFound(err):
			out[sc.IngestionID] = scanReport{}
			continue
		case err != nil:
			return nil, fmt.Errorf("read ingestion %s/%s, which wrote scan %s: %w", ns, sc.IngestionID, sc.ID, err)
		}
		out[sc.IngestionID] = scanReport{fileName: ingestions.FileName(&ing), uploadedBy: ing.Spec.RequestedBy.User, source: reportSource(&ing)}
	}
	return out, nil
}

// reportSource names how an Ingestion's report came: uploaded, or read from
// a declared ConfigMap, Secret or URL.
func reportSource(ing *posturev1.Ingestion) string {
	src := ing.Spec.Source
	switch {
	case src.Upload != nil:
		return "upload"
	case src.ConfigMapRef != nil:
		return "configmap"
	case src.SecretRef != nil:
		return "secret"
	case src.URL != nil:
		return "url"
	}
	return ""
}

// nullable is JSON null for an empty string: a value the API does not know.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// trim keeps only the selected attributes (fields[...]); nil keeps all.
func trim(attrs map[string]any, fields map[string]bool) {
	if fields == nil {
		return
	}
	for k := range attrs {
		if !fields[k] {
			delete(attrs, k)
		}
	}
}
