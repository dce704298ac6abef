package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/internal/store"
)

// Export paths: a listing's filters and sort, written whole as a file
// (internal/export, docs/decisions/0026-finding-exports.md).
const (
	PathFindingsExport       = "/api/v1/findings/export"
	PathLatestFindingsExport = "/api/v1/findings/latest/export"
)

func (s *Server) exportRoutes(mux *http.ServeMux) {
	// Literal patterns: the OpenAPI test reads them from the source.
	mux.Handle("/api/v1/findings/export", s.methodsNegotiated(map[string]handlerFunc{http.MethodGet: s.exportFindings}))
	mux.Handle("/api/v1/findings/latest/export", s.methodsNegotiated(map[string]handlerFunc{http.MethodGet: s.exportLatestFindings}))
}

func (s *Server) exportFindings(w http.ResponseWriter, r *http.Request) error {
	return s.exportFindingsOf(w, r, false)
}

func (s *Server) exportLatestFindings(w http.ResponseWriter, r *http.Request) error {
	return s.exportFindingsOf(w, r, true)
}

// exportFindingsOf answers an export: the same authorization, filters and
// sort as the list it exports, every matching finding in one streamed
// body. Whatever is wrong with the request is answered as the list would
// answer it, before the first byte of the file. Once the file has begun a
// failure can no longer change the status: the connection is then aborted
// (the body lacks HTTP/1.1's last chunk, or HTTP/2's stream is reset), so
// that a client sees a broken transfer rather than a short file it could
// take for the whole export.
func (s *Server) exportFindingsOf(w http.ResponseWriter, r *http.Request, latest bool) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	values := r.URL.Query()
	format, aerr := exportFormat(values.Get("format"), r.Header.Values("Accept"))
	if aerr != nil {
		return aerr
	}
	values.Del("format")
	for name := range values {
		if strings.HasPrefix(name, "page[") || strings.HasPrefix(name, "fields[") {
			return errorf(400, CodeInvalid, "%s does not apply to an export, which holds every matching finding and its whole record; "+
				"keep the filter[...] and sort parameters only", name).parameter(name)
		}
	}
	spec := findingList
	if latest {
		spec = latestFindingList
	}
	spec.cursor = false
	q, aerr := parseListValues(values, spec)
	if aerr != nil {
		return aerr
	}
	fq, aerr := findingQuery(q)
	if aerr != nil {
		return aerr
	}
	fq.Latest = latest
	// The export holds what the list shows: the current state's leaves
	// muted findings out unless asked, as its list does.
	if aerr := mutedQuery(&fq, q, latest); aerr != nil {
		return aerr
	}

	x := export.NewWriter(w, format, latest)
	rc := http.NewResponseController(w)
	begun := false
	begin := func() error {
		begun = true
		h := w.Header()
		h.Set("Content-Type", format.MediaType())
		h.Set("Content-Disposition", `attachment; filename="`+export.Filename(format, latest, s.now())+`"`)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	err = export.Stream(r.Context(), s.Store, p.Tenant, fq, x, begin, rc.Flush)
	if !begun {
		// The first page failed: nothing is written, and the error is
		// answered as the list's would be.
		if errors.Is(err, store.ErrInvalidArgument) {
			return errorf(400, CodeInvalid, "%v", err).parameter("sort")
		}
		return err
	}
	if err == nil {
		err = x.Close()
		if err == nil {
			return nil
		}
		err = fmt.Errorf("%w: %w", export.ErrWrite, err)
	}
	if r.Context().Err() != nil || errors.Is(err, export.ErrWrite) {
		// The client went away: nobody reads the rest, and the server did
		// nothing wrong.
		s.Log.V(1).Info("export abandoned by the client", "path", r.URL.Path, "exported", x.Count(), "error", err.Error())
		return nil
	}
	s.Log.Error(err, "export failed after it began; aborting the connection so the client sees it cut short",
		"path", r.URL.Path, "tenant", p.Tenant, "exported", x.Count())
	panic(http.ErrAbortHandler)
}

// exportFormat is the format parameter's, else the one the Accept header
// names explicitly (text/csv, or application/json for OCSF), else a 400.
// The parameter wins over the header: a download link cannot set one, and
// JSON:API clients send theirs on every request.
func exportFormat(param string, accept []string) (export.Format, *apiError) {
	all := strings.Join(accept, ",")
	if param != "" {
		f, err := export.ParseFormat(param)
		if err != nil {
			return "", errorf(400, CodeInvalid, "%v", err).parameter("format")
		}
		return f, nil
	}
	csvQ, jsonQ := namedQuality(all, "text/csv"), namedQuality(all, "application/json")
	switch {
	case csvQ > 0 && csvQ >= jsonQ:
		return export.CSV, nil
	case jsonQ > 0:
		return export.OCSF, nil
	}
	return "", errorf(400, CodeInvalid, "say which file to export: format=csv or format=ocsf (or an Accept header naming text/csv or application/json)").parameter("format")
}

// namedQuality is the weight the Accept header gives to mediaType where it
// names it exactly; -1 when it does not (a wildcard chooses no format).
func namedQuality(accept, mediaType string) float64 {
	q := -1.0
	for _, r := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(r, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), mediaType) {
			continue
		}
		q = 1
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
		}
	}
	return q
}
