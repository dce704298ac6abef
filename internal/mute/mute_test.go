package mute

import (
	"errors"
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

func TestCompileNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     store.MuteMatch
		field string
	}{
		{"nothing", store.MuteMatch{}, "spec.match"},
		{"bad glob", store.MuteMatch{CheckID: "s3_[bucket"}, "spec.match.checkId"},
		{"bad resource glob", store.MuteMatch{ResourceUID: `arn:*\`}, "spec.match.resourceUid"},
		{"unknown severity", store.MuteMatch{Severity: []string{"high", "severe"}}, "spec.match.severity[1]"},
		{"empty status code", store.MuteMatch{StatusCode: []string{""}}, "spec.match.statusCode[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.m)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Compile(%+v) = %v, want an error about %s", tc.m, err, tc.field)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	f := store.Finding{CheckID: "s3_bucket_public_access", ProviderUID: "123456789012", Region: "eu-west-1",
		ResourceUID: "arn:aws:s3:::logs-prod/x", Severity: "high", StatusCode: "FAIL",
		Raw: []byte(`{"resources":[{"name":"logs-prod","uid":"arn:aws:s3:::logs-prod/x"}]}`)}
	for _, tc := range []struct {
		name string
		m    store.MuteMatch
		want bool
	}{
		{"exact check", store.MuteMatch{CheckID: "s3_bucket_public_access"}, true},
		{"other check", store.MuteMatch{CheckID: "s3_bucket_public"}, false},
		{"glob check", store.MuteMatch{CheckID: "s3_*"}, true},
		{"glob over slash", store.MuteMatch{ResourceUID: "arn:aws:s3:::logs-*"}, true},
		{"question mark", store.MuteMatch{Region: "eu-west-?"}, true},
		{"set", store.MuteMatch{Region: "eu-west-[23]"}, false},
		{"negated set", store.MuteMatch{Region: "eu-west-[!23]"}, true},
		{"escaped star", store.MuteMatch{CheckID: `s3\*`}, false},
		{"account and severity", store.MuteMatch{Account: "123456789012", Severity: []string{"HIGH"}}, true},
		{"account, not severity", store.MuteMatch{Account: "123456789012", Severity: []string{"low"}}, false},
		{"status code any case", store.MuteMatch{StatusCode: []string{"pass", "fail"}}, true},
		{"resource name", store.MuteMatch{ResourceName: "logs-*"}, true},
		{"other resource name", store.MuteMatch{ResourceName: "data-*"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Compile(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Match(&f); got != tc.want {
				t.Fatalf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}
