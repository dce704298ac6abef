package mcp

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// toolText calls a tool and returns its text and whether it failed.
func toolText(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcpsdk.TextContent).Text, res.IsError
}

// TestMuteRuleTools: create_mute_rule creates the rule through the API
// (the MuteRule object, which the controller applies), list_mute_rules
// follows it until ready, and search_findings then leaves the finding out
// of the current state and shows its mark with muted=true; the API's
// refusals (a bad glob, a taken name) are the tool's errors, naming the
// field.
func TestMuteRuleTools(t *testing.T) {
	env := apitest.Start(t, apitest.Options{
		Billing: &posturev1.Subscription{Active: true},
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			return (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(context.Background(), mgr)
		},
	})
	ctx := context.Background()
	report, err := os.Open(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()
	env.Ingest(t, "mute", report)
	cs := inMemoryClient(t, env.URL, env.APIKey)

	type finding struct {
		ID          string `json:"id"`
		CheckID     string `json:"check_id"`
		ProviderUID string `json:"provider_uid"`
		ResourceUID string `json:"resource_uid"`
		Muted       bool   `json:"muted"`
		Mute        *struct{ Rule, Reason string }
	}
	search := func(args map[string]any) (items []finding) {
		t.Helper()
		text, failed := toolText(t, cs, "search_findings", args)
		var page struct{ Items []finding }
		if failed || json.Unmarshal([]byte(text), &page) != nil {
			t.Fatalf("search_findings %v: %s", args, text)
		}
		return page.Items
	}
	before := search(map[string]any{"page_size": 100})
	if len(before) < 2 {
		t.Fatalf("%d findings in the current state; the test needs 2", len(before))
	}
	target := before[0]

	text, failed := toolText(t, cs, "create_mute_rule", map[string]any{"name": "accepted", "check_id": target.CheckID,
		"account": target.ProviderUID, "resource_uid": target.ResourceUID, "reason": "accepted by the security team"})
	if failed {
		t.Fatalf("create_mute_rule: %s", text)
	}
	var created map[string]any
	if err := json.Unmarshal([]byte(text), &created); err != nil {
		t.Fatal(err)
	}
	if created["name"] != "accepted" || created["reason"] != "accepted by the security team" || !strings.Contains(created["next"].(string), "list_mute_rules") {
		t.Errorf("create_mute_rule answered %v", created)
	}
	var rule posturev1.MuteRule
	if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "accepted"}, &rule); err != nil {
		t.Fatalf("the MuteRule object: %v", err)
	}
	if m := rule.Spec.Match; m.CheckID != target.CheckID || m.Account != target.ProviderUID || m.ResourceUID != target.ResourceUID || m.Region != "" {
		t.Errorf("the MuteRule's match %+v", m)
	}

	type ruleItem struct {
		Name            string `json:"name"`
		Ready           bool   `json:"ready"`
		MatchedFindings int    `json:"matched_findings"`
	}
	var listed struct{ Items []ruleItem }
	testenv.Eventually(t, 30*time.Second, "the rule ready", func() (bool, string) {
		text, failed := toolText(t, cs, "list_mute_rules", map[string]any{"name": "accepted"})
		listed.Items = nil
		if failed || json.Unmarshal([]byte(text), &listed) != nil {
			return false, text
		}
		return len(listed.Items) == 1 && listed.Items[0].Ready, text
	})
	if listed.Items[0].MatchedFindings < 1 {
		t.Errorf("the rule mutes %d findings, want at least the target", listed.Items[0].MatchedFindings)
	}

	muted := search(map[string]any{"muted": "true", "page_size": 100})
	found := false
	for _, f := range muted {
		found = found || f.ID == target.ID
		if !f.Muted || f.Mute == nil || f.Mute.Rule != "accepted" || f.Mute.Reason != "accepted by the security team" {
			t.Errorf("a muted finding's mark: muted %v, mute %+v", f.Muted, f.Mute)
		}
	}
	if !found {
		t.Errorf("muted=true lacks the target %s", target.ID)
	}
	if now := search(map[string]any{"page_size": 100}); len(now) != len(before)-len(muted) {
		t.Errorf("the current state holds %d findings after muting %d of %d", len(now), len(muted), len(before))
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"a bad glob", map[string]any{"resource_uid": "arn:[x", "reason": "r"}, []string{"HTTP 400", "spec.match.resourceUid", "at /data/attributes/match/resourceUid"}},
		{"a taken name", map[string]any{"name": "accepted", "check_id": "x", "reason": "r"}, []string{"HTTP 400", "exists already", "at /data/attributes/name"}},
		{"no match", map[string]any{"reason": "r"}, []string{"matches nothing", "at /data/attributes/match"}},
		{"a blank reason", map[string]any{"check_id": "x", "reason": "  "}, []string{"reason is required"}},
		{"a bad expiry", map[string]any{"check_id": "x", "reason": "r", "expires_at": "tomorrow"}, []string{"expires_at", "RFC 3339"}},
	} {
		text, failed := toolText(t, cs, "create_mute_rule", tc.args)
		if !failed {
			t.Errorf("%s: create_mute_rule succeeded: %s", tc.name, text)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: the error %q does not say %q", tc.name, text, w)
			}
		}
	}
}

// TestCreateMuteRuleNeedsThePermission: without mute_findings the API's
// 403 is the tool's error, naming the permission; list_mute_rules is a
// read and works.
func TestCreateMuteRuleNeedsThePermission(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Permissions: []string{string(posturev1.PermissionUnlimitedVisibility)}})
	cs := inMemoryClient(t, env.URL, env.APIKey)
	text, failed := toolText(t, cs, "create_mute_rule", map[string]any{"check_id": "x", "reason": "r"})
	if !failed || !strings.Contains(text, "permission denied (HTTP 403)") || !strings.Contains(text, "mute_findings") {
		t.Errorf("create_mute_rule without the permission: failed %v, %q", failed, text)
	}
	if text, failed := toolText(t, cs, "list_mute_rules", map[string]any{}); failed || !strings.Contains(text, `"items":[]`) {
		t.Errorf("list_mute_rules without rules: failed %v, %s", failed, text)
	}
}
