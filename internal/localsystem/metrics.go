package localsystem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/posture-dev/posture/internal/testenv"
)

// metricsReader is the ServiceAccount the env file's token belongs to: the way a
// Prometheus in a cluster is let in, so the endpoint's authentication is the
// real one, not switched off for development.
const metricsReader = "posture-metrics-reader"

// metricsToken installs config/rbac's metrics-reader ClusterRole, binds a
// ServiceAccount of posture-system to it and returns a token of that account
// valid for a day.
func metricsToken(ctx context.Context, cfg *rest.Config, admin client.Client) (string, error) {
	// From the source tree, as the admission policies are: what ships.
	path := filepath.Join(testenv.Root(), "config", "rbac", "metrics_reader_role.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, o := range []client.Object{
		&role,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsReader, Namespace: "posture-system"}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: metricsReader, Namespace: "posture-system"}},
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
	tr, err := cs.CoreV1().ServiceAccounts("posture-system").CreateToken(ctx, metricsReader, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount posture-system/%s: %w", metricsReader, err)
	}
	return tr.Status.Token, nil
}
