package localsystem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/testenv"
)

// metricsToken installs config/rbac's metrics-reader ClusterRole (from the
// source tree, as the admission policies are: what ships) and returns a
// token of the ServiceAccount bound to it.
func metricsToken(ctx context.Context, cfg *rest.Config, admin client.Client) (string, error) {
	path := filepath.Join(testenv.Root(), "config", "rbac", "metrics_reader_role.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if role.Name != demo.MetricsReader {
		return "", fmt.Errorf("%s: the ClusterRole is %q, want %q", path, role.Name, demo.MetricsReader)
	}
	if err := admin.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
	}
	return demo.MetricsToken(ctx, cfg, admin)
}
