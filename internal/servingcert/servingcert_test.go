package servingcert

import (
	"strings"
	"testing"
	"time"
)

func TestEnsureReplacesWhatItCannotUse(t *testing.T) {
	now := time.Now()
	p := Policy{DNSNames: []string{"posture-aggregated-api.posture-system.svc"}}
	good, err := Ensure(Bundle{}, p, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Ensure(Bundle{}, p, now)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		in         Bundle
		wantReason string
		keepsCA    bool
	}{
		{"empty", Bundle{}, "no CA yet", false},
		{"unchanged", good.Bundle, "", true},
		{"garbage ca.crt", Bundle{CAs: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), CAKey: good.Bundle.CAKey}, "ca.crt unreadable: certificate 0", false},
		{"CA key of another CA", Bundle{CAs: good.Bundle.CAs, CAKey: other.Bundle.CAKey, Cert: good.Bundle.Cert, Key: good.Bundle.Key}, "ca.key does not belong", false},
		{"serving key of another certificate", Bundle{CAs: good.Bundle.CAs, CAKey: good.Bundle.CAKey, Cert: good.Bundle.Cert, Key: other.Bundle.Key}, "tls.key does not belong to tls.crt", true},
		{"serving certificate of another CA", Bundle{CAs: good.Bundle.CAs, CAKey: good.Bundle.CAKey, Cert: other.Bundle.Cert, Key: other.Bundle.Key}, "not signed by the current CA", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := Ensure(c.in, p, now)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Changed != (c.wantReason != "") || !strings.Contains(plan.Reason, c.wantReason) {
				t.Errorf("changed=%v reason %q, want reason containing %q", plan.Changed, plan.Reason, c.wantReason)
			}
			if got := string(plan.Bundle.CAKey) == string(c.in.CAKey); got != c.keepsCA {
				t.Errorf("CA kept = %v, want %v", got, c.keepsCA)
			}
			if _, err := leafOf(plan.Bundle.Cert, plan.Bundle.Key); err != nil {
				t.Errorf("result unusable: %v", err)
			}
		})
	}
	if _, err := Ensure(Bundle{}, Policy{}, now); err == nil || !strings.Contains(err.Error(), "no DNS names") {
		t.Errorf("a policy without names: err %v", err)
	}
}
