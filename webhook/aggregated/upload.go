package aggregated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingestions"
	"github.com/posture-dev/posture/internal/uploads"
)

// DefaultUploadFilename names a report uploaded without ?filename=.
const DefaultUploadFilename = "upload.ocsf.json"

func isUpload(info *apirequest.RequestInfo) bool {
	return info != nil && info.IsResourceRequest && info.APIGroup == datav1.GroupName &&
		info.Resource == "uploads" && info.Subresource == "" && info.Verb == "create"
}

// interceptUploads answers create on uploads itself. It sits inside the
// generic chain, so authentication and the SubjectAccessReview for create
// uploads in the namespace have passed; the generic create handler would
// decode the body as an object, while a report must be streamed.
func (s *Server) interceptUploads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := apirequest.RequestInfoFrom(r.Context())
		if !isUpload(info) {
			next.ServeHTTP(w, r)
			return
		}
		if err := s.upload(w, r); err != nil {
			responsewriters.ErrorNegotiated(err, codecs, datav1.SchemeGroupVersion, w, r)
		}
	})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	tenant, err := s.tenants.tenantOf(ctx, "uploads")
	if err != nil {
		return err
	}
	// Two names would leave the stored one to the order of the query, as
	// the REST API refuses repeated parameters for.
	names := r.URL.Query()["filename"]
	if len(names) > 1 {
		return apierrors.NewBadRequest(fmt.Sprintf("query parameter filename is given %d times; give it once", len(names)))
	}
	filename := DefaultUploadFilename
	if len(names) == 1 && names[0] != "" {
		filename = names[0]
	}
	if err := uploads.CheckFilename(filename); err != nil {
		return apierrors.NewBadRequest("query parameter filename: " + err.Message)
	}
	// A body declared too large is refused from its header alone: reading
	// it only to reject it would let one request fill the store.
	if r.ContentLength > s.uploads.Limit() {
		w.Header().Set("Connection", "close")
		return apierrors.NewRequestEntityTooLargeError(s.uploads.TooLargeError().Message)
	}
	// A body read blocks on the client, not on the request's context: when
	// the request is cut off, the read must end too.
	stop := context.AfterFunc(ctx, func() {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	})
	defer stop()
	var who string
	if u, ok := apirequest.UserFrom(ctx); ok {
		who = u.GetName()
	}
	ing, err := s.uploads.Accept(ctx, uploads.Request{
		Tenant: tenant.Name, Namespace: tenant.NamespaceName(), Filename: filename,
		Body: r.Body, BodyName: "the request body",
		RequestedBy: posturev1.Requester{User: who},
	})
	var ue *uploads.Error
	if errors.As(err, &ue) {
		if ue.Kind == uploads.TooLarge {
			w.Header().Set("Connection", "close")
			return apierrors.NewRequestEntityTooLargeError(ue.Message)
		}
		return apierrors.NewBadRequest(ue.Message)
	}
	if err != nil {
		s.opts.Log.Error(err, "upload failed", "namespace", tenant.NamespaceName())
		return apierrors.NewInternalError(errors.New("the upload failed; the manager's log has the details"))
	}
	// The controller sets the status once it sees the object; the answer
	// says what it will read.
	out := ing.DeepCopy()
	out.APIVersion, out.Kind = posturev1.GroupVersion.String(), "Ingestion"
	out.Status.Phase = posturev1.IngestionPending
	// The records counted at upload, as REST's 202 answers them: the
	// controller copies them into the status it writes.
	out.Status.Summary = ingestions.Summary(ing)
	out.ManagedFields = nil
	body, err := json.Marshal(out)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
	return nil
}

// uploadStorage puts uploads in discovery with the create verb, so RBAC
// rules and kubectl auth can-i name it; its requests never reach Create.
type uploadStorage struct{}

var (
	_ rest.Creater              = &uploadStorage{}
	_ rest.Scoper               = &uploadStorage{}
	_ rest.SingularNameProvider = &uploadStorage{}
)

func (*uploadStorage) New() runtime.Object     { return &datav1.Upload{} }
func (*uploadStorage) Destroy()                {}
func (*uploadStorage) NamespaceScoped() bool   { return true }
func (*uploadStorage) GetSingularName() string { return "upload" }
func (*uploadStorage) Create(context.Context, runtime.Object, rest.ValidateObjectFunc, *metav1.CreateOptions) (runtime.Object, error) {
	return nil, apierrors.NewBadRequest("an upload's body is a raw .ocsf.json report: kubectl create --raw /apis/data.posture.dev/v1alpha1/namespaces/NAMESPACE/uploads?filename=report.ocsf.json -f report.ocsf.json")
}
