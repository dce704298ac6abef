package aggregated

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/tenancy"
)

// StatusReasonPaymentRequired is the reason of a 402: the tenant has no
// active subscription. Kubernetes defines no reason for this code.
const StatusReasonPaymentRequired metav1.StatusReason = "PaymentRequired"

type tenants struct{ reader client.Reader }

// tenantOf finds the tenant a request's namespace belongs to. RBAC has
// already allowed the caller into the namespace; what is left is whether
// the namespace is a tenant's (404 when not) and whether that tenant is
// subscribed (402 when not), the order the REST API answers in.
func (t tenants) tenantOf(ctx context.Context, resource string) (*posturev1.Tenant, error) {
	ns, _ := apirequest.NamespaceFrom(ctx)
	if info, ok := apirequest.RequestInfoFrom(ctx); ok && ns == "" {
		// The generic REST handlers put the namespace in the context; a
		// request answered before them (an upload) has it in RequestInfo.
		ns = info.Namespace
	}
	if ns == "" {
		return nil, apierrors.NewBadRequest(resource + " are namespaced: a tenant namespace is the tenant; name one (kubectl -n NAMESPACE)")
	}
	tenant, err := tenancy.Resolve(ctx, t.reader, ns)
	refusal, why := tenancy.Refused(err)
	switch {
	case refusal == tenancy.OwnerUnclear:
		return nil, apierrors.NewForbidden(schema.GroupResource{Group: "data.posture.dev", Resource: resource}, "", errors.New(why))
	case refusal == tenancy.NoOwner:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
			Message: "namespace " + ns + " belongs to no Tenant; Posture serves " + resource + " only in tenant namespaces",
		}}
	case refusal == tenancy.NotSubscribed:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusPaymentRequired, Reason: StatusReasonPaymentRequired,
			Message: why,
		}}
	case err != nil:
		return nil, apierrors.NewInternalError(err)
	}
	return tenant, nil
}
