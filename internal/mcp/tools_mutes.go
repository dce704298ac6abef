package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/restapi"
)

// createMuteRule posts the rule to POST /api/v1/mute-rules, which creates
// the MuteRule object; the API decides everything (the permission, the
// globs, the name), and its refusal is the tool's error, naming the field.
func (c *caller) createMuteRule(ctx context.Context, in createMuteRuleIn) (map[string]any, error) {
	if strings.TrimSpace(in.Reason) == "" {
		return nil, fmt.Errorf("reason is required: say why these findings are accepted; every door shows it beside the mark")
	}
	match := map[string]any{}
	for k, v := range map[string]string{"checkId": in.CheckID, "account": in.Account, "region": in.Region,
		"resourceUid": in.ResourceUID, "resourceName": in.ResourceName} {
		if v != "" {
			match[k] = v
		}
	}
	if len(in.Severity) > 0 {
		match["severity"] = lower(in.Severity)
	}
	if len(in.StatusCode) > 0 {
		match["statusCode"] = upper(in.StatusCode)
	}
	attrs := map[string]any{"match": match, "reason": in.Reason}
	if in.Name != "" {
		attrs["name"] = in.Name
	}
	if in.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, in.ExpiresAt)
		if err != nil {
			return nil, fmt.Errorf("expires_at %q is not an RFC 3339 time such as 2030-01-01T00:00:00Z", in.ExpiresAt)
		}
		attrs["expires_at"] = t.UTC().Format(time.RFC3339)
	}
	body, err := json.Marshal(map[string]any{"data": map[string]any{"type": "mute-rules", "attributes": attrs}})
	if err != nil {
		return nil, err
	}
	doc, err := c.s.api.post(ctx, c.authz, restapi.PathMuteRules, body)
	if err != nil {
		return nil, err
	}
	r, err := restapi.One[map[string]any](doc)
	if err != nil {
		return nil, err
	}
	out := flatten(r)
	out["next"] = "the operator marks the stored findings in the background; list_mute_rules with name " + r.ID +
		" shows ready and matched_findings once it is done"
	return out, nil
}
