package webhook

import (
	_ "embed"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// OpenAPIYAML is the OpenAPI 3 document of the whole API. It is written by
// hand, next to the handlers, and a test holds the two together: every
// documented operation answers, every registered route is documented, and
// responses validate against the documented schemas.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yaml.YAMLToJSON(OpenAPIYAML) })

// Media types of the two renderings of the document.
const (
	openAPIJSONType = "application/vnd.oai.openapi+json"
	openAPIYAMLType = "application/yaml"
)

func (s *Server) schemaRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/api/v1/schema", s.serveSchema)
}

// serveSchema is GET /api/v1/schema. It needs no credentials: the document
// describes the API, not any tenant's data. It is not JSON:API, so it does
// its own method and Accept handling instead of s.methods.
func (s *Server) serveSchema(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, errorf(405, CodeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	for name := range r.URL.Query() {
		writeError(w, errorf(400, CodeInvalid, "unknown query parameter %q", name).parameter(name))
		return
	}
	asYAML, ok := schemaFormat(r.Header.Get("Accept"))
	if !ok {
		writeError(w, errorf(406, CodeNotAcceptable, "the document is served as %s or %s; the Accept header allows neither", openAPIJSONType, openAPIYAMLType).headerSource("Accept"))
		return
	}
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "public, max-age=300")
	if asYAML {
		w.Header().Set("Content-Type", openAPIYAMLType)
		_, _ = w.Write(OpenAPIYAML)
		return
	}
	doc, err := openAPIJSON()
	if err != nil {
		// The embedded document is checked by tests; this cannot happen in a build that passed them.
		s.Log.Error(err, "the embedded OpenAPI document is not valid YAML")
		writeError(w, newError(500, CodeServerError, fmt.Sprintf("the OpenAPI document cannot be rendered: %v", err)))
		return
	}
	w.Header().Set("Content-Type", openAPIJSONType)
	_, _ = w.Write(doc)
}

// schemaFormat picks the rendering from Accept: YAML when a YAML type has
// a higher quality than every JSON type, JSON otherwise (and when nothing
// is said); neither when both have quality 0, as q=0 refuses a type.
func schemaFormat(accept string) (asYAML, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return false, true
	}
	best := func(types ...string) float64 {
		q := 0.0
		for _, t := range types {
			q = max(q, quality(accept, t))
		}
		return q
	}
	qJSON := best(openAPIJSONType, "application/json", MediaType)
	qYAML := best(openAPIYAMLType, "application/vnd.oai.openapi", "application/x-yaml", "text/yaml")
	switch {
	case qYAML > qJSON:
		return true, true
	case qJSON > 0:
		return false, true
	}
	return false, false
}
