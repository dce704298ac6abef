package workercmd_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestWorkerImportGraph keeps the worker a parser with a store: the
// controllers, the REST API and the tenancy directory are the manager's, and
// a Job pod that pulled them in would carry (and could call) code that
// needs Kubernetes credentials it does not have.
func TestWorkerImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/posture-dev/posture/internal/workercmd").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{
		"github.com/posture-dev/posture/internal/ingest",
		"github.com/posture-dev/posture/internal/billing",
	} {
		if !slices.Contains(deps, want) {
			t.Errorf("the worker does not import %s; the check below would prove nothing", want)
		}
	}
	for _, forbidden := range []string{
		"github.com/posture-dev/posture/controllers",
		"github.com/posture-dev/posture/webhook",
		"github.com/posture-dev/posture/internal/auth",
	} {
		if slices.Contains(deps, forbidden) {
			t.Errorf("the worker imports %s", forbidden)
		}
	}
}
