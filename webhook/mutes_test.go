package webhook_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

func (a *api) postMute(body string) response {
	a.t.Helper()
	return a.request(http.MethodPost, "/api/v1/mute-rules", bytes.NewBufferString(body), http.Header{"Content-Type": {"application/vnd.api+json"}})
}

// TestMuteRulesThroughTheAPI mutes a check through POST /api/v1/mute-rules,
// as the UI's Mute… does: the MuteRule controller marks the stored
// findings, the current state leaves them out of its list and counts by
// default, filter[muted] keeps only them or both, and every finding read
// shows the mark and the rule's reason.
func TestMuteRulesThroughTheAPI(t *testing.T) {
	env := apitest.Start(t, apitest.Options{
		Billing: &posturev1.Subscription{Active: true},
		Setup: func(mgr ctrl.Manager, st store.Store) error {
			return (&controllers.MuteRuleReconciler{Client: mgr.GetClient(), Store: st}).SetupWithManager(t.Context(), mgr)
		},
	})
	a := newAPI(t, env)
	if _, status, _ := a.ingest("three.ocsf.json", fixture(t, "aws_3_records.ocsf.json")); status != "completed" {
		t.Fatalf("ingestion %s", status)
	}
	all := a.list("/api/v1/findings/latest", "page[size]=100")
	if len(all.Data) != 3 {
		t.Fatalf("latest findings: %d, want 3", len(all.Data))
	}
	target := all.Data[0]
	check := target.Attributes["check_id"].(string)
	if target.Attributes["muted"] != false || target.Attributes["mute"] != nil {
		t.Fatalf("an unmuted finding: muted %v, mute %v", target.Attributes["muted"], target.Attributes["mute"])
	}

	r := a.postMute(`{"data":{"type":"mute-rules","attributes":{"name":"accepted","match":{"checkId":"` + check + `","account":"` +
		target.Attributes["provider_uid"].(string) + `"},"reason":"accepted by the security team"}}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/v1/mute-rules: %s", r)
	}
	testenv.Eventually(t, 30*time.Second, "the rule applied", func() (bool, string) {
		d := a.list("/api/v1/mute-rules", "")
		return len(d.Data) == 1 && d.Data[0].Attributes["ready"] == true, string(a.get("/api/v1/mute-rules", "").body)
	})
	muted := a.list("/api/v1/findings/latest", "filter[muted]=true")
	if len(muted.Data) != 1 || muted.Data[0].ID != target.ID {
		t.Fatalf("filter[muted]=true: %v, want %s", muted.ids(), target.ID)
	}
	mark, _ := muted.Data[0].Attributes["mute"].(map[string]any)
	if muted.Data[0].Attributes["muted"] != true || mark["rule"] != "accepted" || mark["reason"] != "accepted by the security team" {
		t.Errorf("a muted finding's attributes: muted %v, mute %v", muted.Data[0].Attributes["muted"], mark)
	}
	if d := a.list("/api/v1/findings/latest", ""); d.Meta.Pagination.Count != 2 || len(d.Data) != 2 {
		t.Errorf("the current state by default: %d (%d listed), want the 2 unmuted", d.Meta.Pagination.Count, len(d.Data))
	}
	if d := a.list("/api/v1/findings/latest", "filter[muted]=any"); len(d.Data) != 3 {
		t.Errorf("filter[muted]=any: %d, want 3", len(d.Data))
	}
	if d := a.list("/api/v1/findings", ""); len(d.Data) != 3 {
		t.Errorf("the history lists muted findings too: %d, want 3", len(d.Data))
	}
	for query, want := range map[string]int{"group_by=severity": 2, "group_by=severity&filter[muted]=true": 1, "group_by=severity&filter[muted]=any": 3} {
		var d countsDoc
		decode(t, a.get("/api/v1/findings/latest/counts", query), &d)
		if d.Meta.Total != want {
			t.Errorf("latest counts %s: total %d, want %d", query, d.Meta.Total, want)
		}
	}
	// The exports hold what the lists show.
	for query, want := range map[string]int{"format=csv": 2, "format=csv&filter[muted]=true": 1, "format=csv&filter[muted]=any": 3} {
		r := a.get("/api/v1/findings/latest/export", query)
		if rows := bytes.Count(r.body, []byte("\r\n")) - 1; r.status != http.StatusOK || rows != want {
			t.Errorf("latest export %s: %d rows (HTTP %d), want %d", query, rows, r.status, want)
		}
	}
	if d := a.list("/api/v1/mute-rules", "filter[name]=accepted"); len(d.Data) != 1 || d.Data[0].ID != "accepted" {
		t.Errorf("the rule by its name: %v", d.ids())
	}
	if d := a.list("/api/v1/mute-rules", "filter[name]=other"); len(d.Data) != 0 {
		t.Errorf("filter[name] of no rule: %v", d.ids())
	}
	one := a.one("/api/v1/findings/"+target.ID, "")
	if one.Data.Attributes["muted"] != true {
		t.Errorf("GET /findings/{id} of a muted finding: muted %v", one.Data.Attributes["muted"])
	}

	// Refusals name what was wrong.
	wantError(t, a.get("/api/v1/findings/latest", "filter[muted]=maybe"), 400, "invalid", "parameter:filter[muted]", "maybe")
	wantError(t, a.postMute(`{"data":{"type":"mute-rules","attributes":{"match":{"resourceUid":"arn:[x"},"reason":"r"}}}`),
		400, "invalid", "pointer:/data/attributes/match/resourceUid", "spec.match.resourceUid")
	wantError(t, a.postMute(`{"data":{"type":"mute-rules","attributes":{"match":{},"reason":"r"}}}`),
		400, "invalid", "pointer:/data/attributes/match", "matches nothing")
	wantError(t, a.postMute(`{"data":{"type":"mute-rules","attributes":{"match":{"checkId":"x"}}}}`),
		400, "invalid", "pointer:/data/attributes/reason", "reason")
	wantError(t, a.postMute(`{"data":{"type":"mute-rules","attributes":{"name":"accepted","match":{"checkId":"x"},"reason":"r"}}}`),
		400, "invalid", "pointer:/data/attributes/name", "exists already")
}

// TestMuteNeedsThePermission: creating a rule needs mute_findings; listing
// rules is a read.
func TestMuteNeedsThePermission(t *testing.T) {
	b := startBare(t, bareOpts{principal: func(p *auth.Principal) {
		delete(p.Permissions, posturev1.PermissionMuteFindings)
	}})
	a := b.api(t)
	wantError(t, a.postMute(`{"data":{"type":"mute-rules","attributes":{"match":{"checkId":"x"},"reason":"r"}}}`),
		403, "permission_denied", "", "mute_findings")
	if d := a.list("/api/v1/mute-rules", ""); len(d.Data) != 0 {
		t.Errorf("rules of a tenant without any: %v", d.ids())
	}
}
