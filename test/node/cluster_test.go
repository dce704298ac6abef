package node

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// envNames are the variables .cluster/env holds: the names of .dev/env,
// so the README's commands work against either.
var envNames = []string{
	"KUBECONFIG", "POSTURE_API_URL", "POSTURE_UI_URL", "POSTURE_MCP_URL", "POSTURE_TENANT_NAMESPACE",
	"POSTURE_METRICS_URL", "POSTURE_METRICS_TOKEN",
	"POSTURE_API_KEY", "POSTURE_VIEWER_API_KEY", "POSTURE_OTHER_API_KEY", "POSTURE_NOSUB_API_KEY",
	"POSTURE_ADMIN_EMAIL", "POSTURE_ADMIN_PASSWORD", "POSTURE_VIEWER_EMAIL", "POSTURE_VIEWER_PASSWORD",
	"SERVICE_CLOUD_API_KEY", "SERVICE_CLOUD_API_BASE_URL",
}

// TestClusterEnvWorksFromTheHostShell sources the .cluster/env that make
// cluster wrote, in a shell on the host, and reaches everything through it:
// kube-apiserver, the API and the UI, the metrics of a manager pod, and the
// MCPServer of the demo tenant.
func TestClusterEnvWorksFromTheHostShell(t *testing.T) {
	needCluster(t)
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^export ([A-Z_]+)=`).FindAllStringSubmatch(string(data), -1) {
		names = append(names, m[1])
	}
	for _, want := range envNames {
		if !slices.Contains(names, want) {
			t.Errorf(".cluster/env lacks %s (has %v)", want, names)
		}
	}
	script := `set -eu
source "$1"
kubectl get nodes -o name
curl -sSf -H "Authorization: Api-Key $POSTURE_API_KEY" "$POSTURE_API_URL/api/v1/tenant"; echo
curl -sSf "$POSTURE_UI_URL" | grep -c '<html'
curl -sSfk -H "Authorization: Bearer $POSTURE_METRICS_TOKEN" "$POSTURE_METRICS_URL" | grep -c '^posture_'
curl -sS -o /dev/null -w '%{http_code}\n' -H "Authorization: Api-Key $POSTURE_NOSUB_API_KEY" "$POSTURE_API_URL/api/v1/ingestions"
"$2" --cli "$POSTURE_MCP_URL" --transport http --header "Authorization: Bearer $POSTURE_API_KEY" --method tools/list | grep -c '"name"'
`
	cmd := exec.Command("bash", "-c", script, "bash", envFile, inspectorBin(t))
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent") // the env file must set it
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the host shell with .cluster/env: %v\n%s", err, out)
	}
	for _, want := range []string{"node/posture-node", `"namespace":"tenant-demo"`, "\n402\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the host shell with .cluster/env: no %q in\n%s", want, out)
		}
	}
}
