package aggregated_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/testenv"
)

// TestMutedFindingsThroughKubectl declares a MuteRule with kubectl apply,
// as GitOps does, waits for it with kubectl wait and reads it with kubectl
// get muterules (its printer columns); the findings it mutes leave the
// current state (latest=true) as REST's /findings/latest leaves them, show
// the rule in the MUTED column (the reason with -o wide and in -o json),
// and the field selector muted=true|false|any chooses them.
func TestMutedFindingsThroughKubectl(t *testing.T) {
	env, admin := startAggregated(t, false, 1<<20)
	k := kubectl{t: t, kubeconfig: adminKubeconfig(t)}
	ns := env.Namespace
	testenv.Eventually(t, time.Minute, "the aggregated API to answer", func() (bool, string) {
		r := k.run(nil, "get", "findings", "-n", ns)
		return r.err == nil, r.stderr
	})
	file := testenv.Fixture("aws_3_records.ocsf.json")
	var ing posturev1.Ingestion
	if err := json.Unmarshal([]byte(k.ok("create", "--raw", uploadPath(ns, filepath.Base(file)), "-f", file)), &ing); err != nil {
		t.Fatal(err)
	}
	waitCompleted(t, admin, ns, ing.Name)

	type finding struct {
		Name        string `json:"-"` // metadata.name
		CheckID     string `json:"checkID"`
		ProviderUID string `json:"providerUID"`
		ResourceUID string `json:"resourceUID"`
		Muted       bool   `json:"muted"`
		MuteRule    string `json:"muteRule"`
		MuteReason  string `json:"muteReason"`
	}
	list := func(selector string) []finding {
		t.Helper()
		var l struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
				finding
			} `json:"items"`
		}
		args := []string{"get", "findings", "-n", ns, "-o", "json"}
		if selector != "" {
			args = append(args, "--field-selector", selector)
		}
		if err := json.Unmarshal([]byte(k.ok(args...)), &l); err != nil {
			t.Fatal(err)
		}
		out := make([]finding, 0, len(l.Items))
		for _, it := range l.Items {
			f := it.finding
			f.Name = it.Metadata.Name
			out = append(out, f)
		}
		return out
	}
	names := func(fs []finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Name)
		}
		slices.Sort(out)
		return out
	}
	before := list("latest=true")
	if len(before) < 2 {
		t.Fatalf("%d findings in the current state; the test needs 2", len(before))
	}
	target := before[0]

	rule := `apiVersion: posture.dev/v1alpha1
kind: MuteRule
metadata:
  name: accepted
  namespace: ` + ns + `
spec:
  match:
    checkId: "` + target.CheckID + `"
    account: "` + target.ProviderUID + `"
    resourceUid: "` + target.ResourceUID + `"
  reason: Accepted by the security team
`
	if r := k.run(strings.NewReader(rule), "apply", "-f", "-"); r.err != nil {
		t.Fatalf("kubectl apply: %v\n%s", r.err, r.stderr)
	}
	k.ok("wait", "--for=condition=Ready", "-n", ns, "muterule/accepted", "--timeout=60s")

	t.Run("kubectl get muterules shows its state", func(t *testing.T) {
		lines := strings.Split(strings.TrimSpace(k.ok("get", "muterules", "-n", ns)), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REASON MATCHED EXPIRES READY AGE" {
			t.Fatalf("kubectl get muterules:\n%s", strings.Join(lines, "\n"))
		}
		if f := strings.Fields(lines[1]); f[0] != "accepted" || !strings.Contains(lines[1], "Accepted by the security team") || !slices.Contains(f, "True") {
			t.Errorf("the rule's row %q; want its name, reason, match count and Ready True", lines[1])
		}
		if wide := k.ok("get", "muterules", "-n", ns, "-o", "wide"); !strings.Contains(wide, "MESSAGE") || !strings.Contains(wide, "mutes ") {
			t.Errorf("kubectl get muterules -o wide lacks the Ready message:\n%s", wide)
		}
	})

	muted := list("latest=true,muted=true")
	t.Run("the field selector muted", func(t *testing.T) {
		if !slices.ContainsFunc(muted, func(f finding) bool { return f.Name == target.Name }) {
			t.Fatalf("muted=true %v lacks %s", names(muted), target.Name)
		}
		for _, f := range muted {
			if !f.Muted || f.MuteRule != "accepted" || f.MuteReason != "Accepted by the security team" {
				t.Errorf("a muted finding reads muted %v, rule %q, reason %q", f.Muted, f.MuteRule, f.MuteReason)
			}
		}
		current := list("latest=true")
		if slices.ContainsFunc(current, func(f finding) bool { return f.Muted }) || len(current)+len(muted) != len(before) {
			t.Errorf("the current state by default: %d findings (%d muted), want the %d unmuted", len(current), len(muted), len(before)-len(muted))
		}
		if got := list("latest=true,muted=false"); !slices.Equal(names(got), names(current)) {
			t.Errorf("muted=false %v; want the default %v", names(got), names(current))
		}
		if got := list("latest=true,muted=any"); !slices.Equal(names(got), names(before)) {
			t.Errorf("muted=any %v; want every finding %v", names(got), names(before))
		}
		if got := list(""); len(got) != len(before) {
			t.Errorf("the history lists %d findings; want every one, %d, muted or not", len(got), len(before))
		}
		if got := list("muted=true"); !slices.Equal(names(got), names(muted)) {
			t.Errorf("the history's muted=true %v; want %v", names(got), names(muted))
		}
		r := k.run(nil, "get", "findings", "-n", ns, "--field-selector", "latest=true,muted=maybe")
		if r.err == nil || !strings.Contains(r.stderr, "muted=maybe: want true") {
			t.Errorf("muted=maybe: %v %s", r.err, r.stderr)
		}
		var one struct{ finding }
		if err := json.Unmarshal([]byte(k.ok("get", "finding", target.Name, "-n", ns, "-o", "json")), &one); err != nil || !one.Muted || one.MuteRule != "accepted" {
			t.Errorf("get finding %s: muted %v rule %q (%v)", target.Name, one.Muted, one.MuteRule, err)
		}
	})

	t.Run("the MUTED column", func(t *testing.T) {
		out := k.ok("get", "findings", "-n", ns, "--field-selector", "latest=true,muted=any")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); got != "NAME SEVERITY STATUS CODE CHECK RESOURCE PROVIDER DELTA FIRST SEEN MUTED AGE" {
			t.Fatalf("header %q", got)
		}
		for _, l := range lines[1:] {
			isMuted := slices.ContainsFunc(muted, func(f finding) bool { return strings.HasPrefix(l, f.Name+" ") })
			if strings.Contains(l, " accepted ") != isMuted {
				t.Errorf("row %q: MUTED shows the rule %v, want %v", l, !isMuted, isMuted)
			}
		}
		wide := k.ok("get", "findings", "-n", ns, "--field-selector", "latest=true,muted=true", "-o", "wide")
		if !strings.Contains(wide, "MUTE REASON") || !strings.Contains(wide, "Accepted by the security team") {
			t.Errorf("-o wide lacks the reason:\n%s", wide)
		}
	})
}
