package aggregated_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/testenv"
)

// TestCurrentStateThroughKubectl uploads apitest.CurrentScenario's reports
// of one account with kubectl create --raw, on both engines, and after each
// lists the findings with kubectl (field selectors latest=true and
// latest=true,delta=…): the current state, each finding's delta and first
// sighting, and the resolved findings are what the rule gives, as REST and
// MCP show them (internal/mcp's TestCurrentStateThroughRESTAndMCP).
func TestCurrentStateThroughKubectl(t *testing.T) {
	for _, engine := range []struct {
		name     string
		postgres bool
	}{{"sqlite", false}, {"postgres", true}} {
		t.Run(engine.name, func(t *testing.T) { currentThroughKubectl(t, engine.postgres) })
	}
}

func currentThroughKubectl(t *testing.T, postgres bool) {
	env, admin := startAggregated(t, postgres, 1<<20)
	k := kubectl{t: t, kubeconfig: adminKubeconfig(t)}
	ns := env.Namespace
	// The APIService stays Available from the engine before while this
	// server loads the front-proxy CA; it answers 503 until then.
	testenv.Eventually(t, time.Minute, "the aggregated API of this engine to answer", func() (bool, string) {
		r := k.run(nil, "get", "findings", "-n", ns)
		return r.err == nil, r.stderr
	})

	type finding struct {
		UID         string `json:"uid"`
		StatusCode  string `json:"statusCode"`
		Delta       string `json:"delta"`
		FirstSeenAt string `json:"firstSeenAt"`
	}
	list := func(selector string) []finding {
		t.Helper()
		var l struct {
			Items []finding `json:"items"`
		}
		if err := json.Unmarshal([]byte(k.ok("get", "findings", "-n", ns, "--field-selector", selector, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	render := func(fs []finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, strings.TrimSpace(f.UID+" "+f.StatusCode+" "+f.Delta))
		}
		slices.Sort(out)
		return out
	}
	for i, step := range apitest.CurrentScenario(t) {
		file := filepath.Join(t.TempDir(), fmt.Sprintf("report-%d.ocsf.json", i))
		if err := os.WriteFile(file, step.Report, 0o600); err != nil {
			t.Fatal(err)
		}
		var ing posturev1.Ingestion
		if err := json.Unmarshal([]byte(k.ok("create", "--raw", uploadPath(ns, filepath.Base(file)), "-f", file)), &ing); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, admin, ns, ing.Name)

		current := list("latest=true")
		if got := render(current); !slices.Equal(got, step.Current) {
			t.Errorf("%s: kubectl get findings --field-selector latest=true: %v, want %v", step.Name, got, step.Current)
		}
		for _, f := range current {
			if want := step.FirstSeenOfU1.Format(time.RFC3339); f.UID == "u1" && f.FirstSeenAt != want {
				t.Errorf("%s: u1 first seen at %q, want %q", step.Name, f.FirstSeenAt, want)
			}
		}
		for _, d := range []string{"new", "changed"} {
			var want []string
			for _, c := range step.Current {
				if strings.HasSuffix(c, " "+d) {
					want = append(want, c)
				}
			}
			if got := render(list("latest=true,delta=" + d)); !slices.Equal(got, want) {
				t.Errorf("%s: delta=%s: %v, want %v", step.Name, d, got, want)
			}
		}
		if got := render(list("latest=true,delta=resolved")); !slices.Equal(got, step.Resolved) {
			t.Errorf("%s: delta=resolved: %v, want %v", step.Name, got, step.Resolved)
		}
	}
	if r := k.run(nil, "get", "findings", "-n", ns, "--field-selector", "delta=new"); r.err == nil || !strings.Contains(r.stderr, "add latest=true") {
		t.Errorf("delta without latest=true: %v %s, want refused", r.err, r.stderr)
	}
}
