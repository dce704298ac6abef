package billing_test

import (
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/billing"
)

func TestProviderName(t *testing.T) {
	for _, tc := range []struct{ typ, uid, want string }{
		{"aws", "123456789012", "aws-123456789012"},
		{"azure", "00000000-0000-0000-0000-000000000001", "azure-00000000-0000-0000-0000-000000000001"},
		{"gcp", "my-project-1", "gcp-my-project-1"},
		{"aws", "<account_uid>", "aws-account-uid-"},                                                                   // sanitized + hash
		{"kubernetes", "arn:aws:eks:us-east-1:123:cluster/prod", "kubernetes-arn-aws-eks-us-east-1-123-cluster-prod-"}, // sanitized + hash
		{"gcp", "My-Project", "gcp-my-project-"},                                                                       // case would be lost: hashed
		{"aws", strings.Repeat("9", 80), "aws-" + strings.Repeat("9", 50) + "-"},                                       // too long: cut + hash
	} {
		got := billing.ProviderName(tc.typ, tc.uid)
		if strings.HasSuffix(tc.want, "-") {
			if !strings.HasPrefix(got, tc.want) || len(got) != len(tc.want)+8 || len(got) > 63 {
				t.Errorf("ProviderName(%s, %s) = %q, want %q + 8 hex characters, at most 63", tc.typ, tc.uid, got, tc.want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("ProviderName(%s, %s) = %q, want %q", tc.typ, tc.uid, got, tc.want)
		}
	}
	if billing.ProviderName("gcp", "My-Project") == billing.ProviderName("gcp", "my-project") {
		t.Error("two accounts got the same Provider name")
	}
}
