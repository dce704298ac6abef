package demo

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsReader is the ServiceAccount, in posture-system, whose token the env
// file's POSTURE_METRICS_TOKEN is, and the ClusterRole it is bound to (the
// one config/rbac and the chart ship): the way a Prometheus in a cluster is
// let in, so the endpoint's authentication is the real one, not switched
// off for a local system.
const MetricsReader = "posture-metrics-reader"

// MetricsToken binds the MetricsReader ServiceAccount to the ClusterRole of
// that name, which must exist, and returns a token of the account valid for
// a day.
func MetricsToken(ctx context.Context, cfg *rest.Config, admin client.Client) (string, error) {
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsReader, Namespace: "posture-system"}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MetricsReader, Namespace: "posture-system"}},
		},
	} {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts("posture-system").CreateToken(ctx, MetricsReader, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount posture-system/%s: %w", MetricsReader, err)
	}
	return tr.Status.Token, nil
}
