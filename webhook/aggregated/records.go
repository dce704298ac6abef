package aggregated

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
)

// IncludeRecordsParam is datav1.IncludeRecordsParam. A page with records
// is still at most MaxListLimit findings, and each page its own request,
// so an export of any size never meets kube-apiserver's request timeout.
const IncludeRecordsParam = datav1.IncludeRecordsParam

type recordsKey struct{}

func includeRecords(ctx context.Context) bool {
	v, _ := ctx.Value(recordsKey{}).(bool)
	return v
}

// withRecordsOption reads IncludeRecordsParam of a list of findings into
// the request's context, where List finds it: the generic server hands
// List only the standard list options. It sits inside the generic chain,
// after authorization (list findings in the namespace).
func withRecordsOption(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := apirequest.RequestInfoFrom(r.Context())
		if info == nil || !info.IsResourceRequest || info.APIGroup != datav1.GroupName || info.Resource != "findings" || info.Verb != "list" {
			next.ServeHTTP(w, r)
			return
		}
		values := r.URL.Query()[IncludeRecordsParam]
		switch {
		case len(values) == 0 || (len(values) == 1 && values[0] == "false"):
		case len(values) == 1 && values[0] == "true":
			r = r.WithContext(context.WithValue(r.Context(), recordsKey{}, true))
		default:
			err := apierrors.NewBadRequest(fmt.Sprintf("query parameter %s=%q: want true (each finding with its OCSF record) or false", IncludeRecordsParam, values))
			responsewriters.ErrorNegotiated(err, codecs, datav1.SchemeGroupVersion, w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
