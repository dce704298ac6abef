package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/mute"
	"github.com/posture-dev/posture/internal/store"
)

// Mute rules are MuteRule objects in the tenant's namespace; who may mute
// is Kubernetes RBAC on muterules for kubectl and GitOps, and the
// mute_findings permission here, where the manager's client creates the
// object for the caller (docs/decisions/0024-mute-rules.md).

// mutedQuery sets fq.Muted from filter[muted] (findings.Muted).
func mutedQuery(fq *store.FindingQuery, q listQuery, latest bool) *apiError {
	v, given := q.filters["muted"]
	muted, ok := findings.Muted(v, given, latest)
	if !ok {
		return errorf(400, CodeInvalid, "unknown filter[muted] %q; one of %s", v, joinKeys(set(findings.MutedValues...))).parameter("filter[muted]")
	}
	fq.Muted = muted
	return nil
}

// muteAttrs are a finding's mute attributes: muted, and mute {rule,
// reason} or null.
func muteAttrs(all map[string]any, f *store.Finding) {
	all["muted"] = f.Mute != nil
	all["mute"] = nil
	if f.Mute != nil {
		all["mute"] = map[string]any{"rule": f.Mute.Rule, "reason": f.Mute.Reason}
	}
}

func (s *Server) muteRoutes(mux *http.ServeMux) {
	mux.Handle("/api/v1/mute-rules", s.methods(map[string]handlerFunc{http.MethodGet: s.listMuteRules, http.MethodPost: s.createMuteRule}))
}

// muteRuleList takes filter[name], the rule's self link: a rule is read
// by name, as the UI follows the one it created.
var muteRuleList = listSpec{resourceType: "mute-rules", filters: set("name"), sortKeys: set("name"), defaultSort: []string{"name"}}

func (s *Server) listMuteRules(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorizeRead(r)
	if err != nil {
		return err
	}
	q, aerr := parseList(r, muteRuleList)
	if aerr != nil {
		return aerr
	}
	var list posturev1.MuteRuleList
	if err := s.Client.List(r.Context(), &list, inNamespace(p.Namespace)); err != nil {
		return err
	}
	items := make([]*posturev1.MuteRule, 0, len(list.Items))
	for i := range list.Items {
		if name, ok := q.filters["name"]; ok && list.Items[i].Name != name {
			continue
		}
		if list.Items[i].DeletionTimestamp.IsZero() {
			items = append(items, &list.Items[i])
		}
	}
	desc := len(q.sort) > 0 && strings.HasPrefix(q.sort[0], "-")
	sort.Slice(items, func(i, j int) bool { return (items[i].Name < items[j].Name) != desc })
	return writeMemoryPage(w, r, q, items, func(m *posturev1.MuteRule) resource { return muteRuleResource(r, m) })
}

// maxMuteBody bounds a mute rule's request body.
const maxMuteBody = 16 << 10

type muteRequest struct {
	Data *struct {
		Type       string `json:"type"`
		Attributes struct {
			Name      string              `json:"name"`
			Match     posturev1.MuteMatch `json:"match"`
			Reason    string              `json:"reason"`
			ExpiresAt *time.Time          `json:"expires_at"`
		} `json:"attributes"`
	} `json:"data"`
}

func (s *Server) createMuteRule(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authorize(r, posturev1.PermissionMuteFindings)
	if err != nil {
		return err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != MediaType && mt != "application/json" {
		return errorf(415, CodeUnsupportedMedia, "send the body as %s; Content-Type was %q", MediaType, r.Header.Get("Content-Type")).headerSource("Content-Type")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMuteBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(413, CodeFileTooLarge, "the request body is larger than %d bytes", maxMuteBody)
	}
	if err != nil {
		return errorf(400, CodeInvalid, "reading the request body failed after %d bytes: %v", len(body), err)
	}
	var req muteRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return newError(400, CodeInvalid, "the request body is empty; expected a JSON:API document with data").pointer("/data")
		}
		return tokenBodyError(err, len(body))
	}
	if req.Data == nil {
		return newError(400, CodeInvalid, "the body must be a JSON:API document with a data member").pointer("/data")
	}
	if req.Data.Type != "mute-rules" {
		return errorf(400, CodeInvalid, "data.type must be %q, got %q", "mute-rules", req.Data.Type).pointer("/data/type")
	}
	a := req.Data.Attributes
	if strings.TrimSpace(a.Reason) == "" {
		return newError(400, CodeInvalid, "data.attributes.reason is required: say why these findings are accepted").pointer("/data/attributes/reason")
	}
	if _, err := mute.Compile(mute.MatchOf(a.Match)); err != nil {
		var fe *mute.FieldError
		ptr := "/data/attributes/match"
		if errors.As(err, &fe) {
			if field := strings.TrimPrefix(fe.Field, "spec.match."); field != fe.Field {
				ptr += "/" + strings.NewReplacer("[", "/", "]", "").Replace(field)
			}
		}
		return errorf(400, CodeInvalid, "%v", err).pointer(ptr)
	}
	rule := &posturev1.MuteRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: a.Name},
		Spec:       posturev1.MuteRuleSpec{Match: a.Match, Reason: a.Reason},
	}
	if a.Name == "" {
		rule.GenerateName = "mute-"
	}
	if a.ExpiresAt != nil {
		rule.Spec.ExpiresAt = &metav1.Time{Time: *a.ExpiresAt}
	}
	if err := s.Client.Create(r.Context(), rule); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			return errorf(400, CodeInvalid, "a mute rule named %q exists already in this tenant; choose another name", a.Name).pointer("/data/attributes/name")
		case apierrors.IsInvalid(err):
			return errorf(400, CodeInvalid, "the mute rule was refused: %v", err).pointer("/data/attributes")
		}
		return err
	}
	res := muteRuleResource(r, rule)
	w.Header().Set("Location", res.Links["self"].(string))
	writeJSON(w, http.StatusCreated, document{Data: res, Meta: meta{Version: APIVersion}})
	return nil
}

func muteRuleResource(r *http.Request, m *posturev1.MuteRule) resource {
	attrs := map[string]any{
		"name":             m.Name,
		"match":            m.Spec.Match,
		"reason":           m.Spec.Reason,
		"expires_at":       nil,
		"matched_findings": m.Status.MatchedFindings,
		"ready":            false,
		"message":          "",
		"created_at":       m.CreationTimestamp.UTC().Format(time.RFC3339),
	}
	if m.Spec.ExpiresAt != nil {
		attrs["expires_at"] = m.Spec.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if c := apimeta.FindStatusCondition(m.Status.Conditions, posturev1.ConditionReady); c != nil && c.ObservedGeneration == m.Generation {
		attrs["ready"] = c.Status == metav1.ConditionTrue
		attrs["message"] = c.Message
	}
	return resource{Type: "mute-rules", ID: m.Name, Attributes: attrs,
		Links: map[string]any{"self": absoluteURL(r, mustURL("/api/v1/mute-rules?filter[name]="+m.Name))}}
}
