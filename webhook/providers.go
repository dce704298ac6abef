package webhook

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

var providerFields = set("type", "uid", "alias", "origin", "inserted_at")

var providerList = listSpec{
	resourceType: "providers",
	filters:      set("type", "type__in", "origin", "uid", "search"),
	sortKeys:     set("inserted_at", "type", "uid", "alias"),
	defaultSort:  []string{"-inserted_at"},
	fields:       providerFields,
}

var providerOrigins = set(string(posturev1.ProviderConnected), string(posturev1.ProviderImported))

// Providers are the tenant's billed cloud accounts: the Provider objects in
// its namespace, whether declared by people (connected) or created by an
// ingestion (imported). The API only reads them; Kubernetes is their store.
func (s *Server) providerRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/providers", s.methods(map[string]handlerFunc{http.MethodGet: s.listProviders}))
	mux.Handle("/api/v1/providers/{id}", s.methods(map[string]handlerFunc{http.MethodGet: s.getProvider}))
}

func (s *Server) listProviders(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	q, aerr := parseList(r, providerList)
	if aerr != nil {
		return aerr
	}
	match, aerr := providerFilter(q.filters)
	if aerr != nil {
		return aerr
	}
	var list posturev1.ProviderList
	if err := s.Client.List(r.Context(), &list, inNamespace(p.Namespace)); err != nil {
		return err
	}
	items := make([]*posturev1.Provider, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() && match(&list.Items[i]) {
			items = append(items, &list.Items[i])
		}
	}
	sortProviders(items, q.sort)
	return writeMemoryPage(w, r, q, items, func(pr *posturev1.Provider) resource { return providerResource(r, pr, q.fields) })
}

func (s *Server) getProvider(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	for name := range r.URL.Query() {
		if name != "fields[providers]" {
			return errorf(400, CodeInvalid, "unknown query parameter %q", name).parameter(name)
		}
	}
	q, aerr := parseList(r, listSpec{resourceType: "providers", fields: providerFields})
	if aerr != nil {
		return aerr
	}
	id := r.PathValue("id")
	notFound := errorf(404, CodeNotFound, "no provider %q in this tenant", id).parameter("id")
	// Only object names reach the API server: anything else (say "..")
	// could address a different path there.
	if len(validation.IsDNS1123Subdomain(id)) > 0 {
		return notFound
	}
	var pr posturev1.Provider
	key := types.NamespacedName{Namespace: p.Namespace, Name: id}
	err = s.Client.Get(r.Context(), key, &pr)
	if apierrors.IsNotFound(err) && s.APIReader != nil {
		err = s.APIReader.Get(r.Context(), key, &pr)
	}
	if apierrors.IsNotFound(err) || (err == nil && !pr.DeletionTimestamp.IsZero()) {
		return notFound
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, document{Data: providerResource(r, &pr, q.fields), Meta: meta{Version: APIVersion}})
	return nil
}

func originOf(p *posturev1.Provider) string {
	if p.Spec.Origin == "" {
		return string(posturev1.ProviderConnected)
	}
	return string(p.Spec.Origin)
}

func providerFilter(f map[string]string) (func(*posturev1.Provider) bool, *apiError) {
	var checks []func(*posturev1.Provider) bool
	if v, ok := f["type"]; ok {
		want := strings.ToLower(strings.TrimSpace(v))
		if want == "" {
			return nil, newError(400, CodeInvalid, "filter[type] must not be empty").parameter("filter[type]")
		}
		checks = append(checks, func(p *posturev1.Provider) bool { return p.Spec.Type == want })
	}
	if v, ok := f["type__in"]; ok {
		want := map[string]bool{}
		for _, t := range strings.Split(v, ",") {
			t = strings.ToLower(strings.TrimSpace(t))
			if t == "" {
				return nil, newError(400, CodeInvalid, "filter[type__in] must not hold empty items").parameter("filter[type__in]")
			}
			want[t] = true
		}
		checks = append(checks, func(p *posturev1.Provider) bool { return want[p.Spec.Type] })
	}
	if v, ok := f["origin"]; ok {
		if !providerOrigins[v] {
			return nil, errorf(400, CodeInvalid, "filter[origin] must be connected or imported; got %q", v).parameter("filter[origin]")
		}
		checks = append(checks, func(p *posturev1.Provider) bool { return originOf(p) == v })
	}
	if v, ok := f["uid"]; ok {
		if v == "" {
			return nil, newError(400, CodeInvalid, "filter[uid] must not be empty").parameter("filter[uid]")
		}
		checks = append(checks, func(p *posturev1.Provider) bool { return p.Spec.UID == v })
	}
	if v, ok := f["search"]; ok {
		term := strings.ToLower(v)
		checks = append(checks, func(p *posturev1.Provider) bool {
			return strings.Contains(p.Name, term) || strings.Contains(strings.ToLower(p.Spec.UID), term) ||
				strings.Contains(strings.ToLower(p.Spec.Alias), term) || strings.Contains(p.Spec.Type, term)
		})
	}
	return func(p *posturev1.Provider) bool {
		for _, c := range checks {
			if !c(p) {
				return false
			}
		}
		return true
	}, nil
}

func sortProviders(items []*posturev1.Provider, keys []string) {
	slices.SortStableFunc(items, func(a, b *posturev1.Provider) int {
		for _, key := range keys {
			field := strings.TrimPrefix(key, "-")
			var c int
			switch field {
			case "inserted_at":
				c = a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
			case "type":
				c = cmp.Compare(a.Spec.Type, b.Spec.Type)
			case "uid":
				c = cmp.Compare(a.Spec.UID, b.Spec.UID)
			case "alias":
				c = cmp.Compare(a.Spec.Alias, b.Spec.Alias)
			}
			if strings.HasPrefix(key, "-") {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return strings.Compare(a.Name, b.Name)
	})
}

func providerResource(r *http.Request, p *posturev1.Provider, fields map[string]bool) resource {
	attrs := map[string]any{
		"type":        p.Spec.Type,
		"uid":         p.Spec.UID,
		"alias":       p.Spec.Alias,
		"origin":      originOf(p),
		"inserted_at": p.CreationTimestamp.UTC().Format(time.RFC3339),
	}
	trim(attrs, fields)
	return resource{Type: "providers", ID: p.Name, Attributes: attrs,
		Links: map[string]any{"self": absoluteURL(r, mustURL("/api/v1/providers/"+p.Name))}}
}
