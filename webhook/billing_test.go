package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/testenv"
)

// Billing through the whole API: a report with two accounts on a plan that
// bills one. The first account gets a Provider; the other's records are
// invalid with provider_limit_exceeded, explained by the errors endpoint.
func TestUploadBillsProvidersWithinThePlan(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Billing: &posturev1.Subscription{Active: true, ProviderLimit: 1}})
	raw, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var records []map[string]any
	if err := json.Unmarshal(raw, &records); err != nil {
		t.Fatal(err)
	}
	// Record 2 moves to a second account.
	cloud := records[2]["cloud"].(map[string]any)
	cloud["account"].(map[string]any)["uid"] = "999999999999"
	if u, ok := records[2]["unmapped"].(map[string]any); ok && u["provider_uid"] != nil {
		u["provider_uid"] = "999999999999"
	}
	report, _ := json.Marshal(records)

	resp, b := uploadFile(t, env, "two-accounts.ocsf.json", report)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	var d jobDoc
	_ = json.Unmarshal(b, &d)
	var got jobDoc
	testenv.Eventually(t, 60*time.Second, "the job to end", func() (bool, string) {
		got = getJob(t, env, d.Data.ID)
		return restapi.Terminal(got.Data.Attributes.Status), fmt.Sprintf("%+v", got.Data.Attributes)
	})
	a := got.Data.Attributes
	if a.Status != "completed" || a.Summary.Total != 3 || a.Summary.Processed != 3 || a.Summary.Invalid != 1 {
		t.Fatalf("job = %+v, want completed 3/3 with 1 invalid", a)
	}

	req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/ingestions/"+d.Data.ID+"/errors", nil)
	req.Header.Set("Authorization", env.Authorization())
	resp, b = do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"code":"provider_limit_exceeded"`) || !strings.Contains(string(b), `"record_index":2`) {
		t.Fatalf("errors: %d %s", resp.StatusCode, b)
	}

	var providers posturev1.ProviderList
	if err := env.Client.List(t.Context(), &providers); err != nil {
		t.Fatal(err)
	}
	var mine []posturev1.Provider
	for _, p := range providers.Items {
		if p.Namespace == env.Namespace {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 || mine[0].Spec.Origin != posturev1.ProviderImported || mine[0].Spec.UID == "999999999999" {
		t.Fatalf("providers = %+v, want one imported provider for the first account", mine)
	}
}
