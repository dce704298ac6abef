package webhook

import (
	"net/http"
	"net/url"
	"time"

	"github.com/posture-dev/posture/internal/findings"
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
	reports, err := s.ingestions().Reports(r.Context(), p.Namespace, rows)
	if err != nil {
		return err
	}
	data := make([]resource, 0, len(rows))
	for _, sc := range rows {
		var scanned any
		if !sc.ScannedAt.IsZero() {
			scanned = sc.ScannedAt.UTC().Format(time.RFC3339Nano)
		}
		total, failing := findings.Failing(&sc)
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
			"file_name":     nullable(rep.FileName),
			"uploaded_by":   nullable(rep.UploadedBy),
			"source":        nullable(rep.Source),
		}
		trim(attrs, q.fields)
		findingsLink := "/api/v1/findings?" + url.Values{"filter[scan]": {sc.ID}}.Encode()
		data = append(data, resource{Type: "scans", ID: sc.ID, Attributes: attrs,
			Links: map[string]any{"findings": absoluteURL(r, mustURL(findingsLink))}})
	}
	writeJSON(w, http.StatusOK, document{Data: data, Links: links, Meta: meta{Version: APIVersion, Pagination: &pg}})
	return nil
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
