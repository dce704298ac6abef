package auth

import (
	"regexp"
	"strings"
	"testing"
)

func TestGenerateKey(t *testing.T) {
	shape := regexp.MustCompile(`^pk_[a-z0-9]{8}\.[A-Za-z0-9_-]{43}$`)
	seen := map[string]bool{}
	for range 200 {
		key, prefix, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if !shape.MatchString(key) {
			t.Fatalf("key has the wrong shape: %d characters, prefix %s", len(key), prefix)
		}
		if !strings.HasPrefix(key, prefix+".") {
			t.Fatalf("prefix %s is not the key's public part", prefix)
		}
		got, err := ParseKey(key)
		if err != nil || got != prefix {
			t.Fatalf("ParseKey of a generated key = %q, %v; want %q", got, err, prefix)
		}
		if seen[key] || seen[prefix] {
			t.Fatal("GenerateKey repeated a key or prefix in 200 draws")
		}
		seen[key], seen[prefix] = true, true
	}
}

func TestParseKey(t *testing.T) {
	secret := strings.Repeat("A", 43)
	for _, tc := range []struct {
		name, key, prefix string
	}{
		{"generated shape", "pk_abcd1234." + secret, "pk_abcd1234"},
		{"base64url prefix (apitest.NewKey)", "pk_ab-_CD12." + secret, "pk_ab-_CD12"},
		{"longer secret", "pk_abcd1234." + secret + "xyz", "pk_abcd1234"},
		{"no dot", "pk_abcd1234" + secret, ""},
		{"no scheme", "abcd1234." + secret, ""},
		{"other scheme", "sk_abcd1234." + secret, ""},
		{"short prefix", "pk_abc." + secret, ""},
		{"long prefix", "pk_abcd12345." + secret, ""},
		{"short secret", "pk_abcd1234." + secret[:42], ""},
		{"bad characters in secret", "pk_abcd1234." + secret[:40] + "+/=", ""},
		{"bad characters in prefix", "pk_abcd 234." + secret, ""},
		{"empty", "", ""},
		{"huge", "pk_abcd1234." + strings.Repeat("A", 600), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKey(tc.key)
			if tc.prefix == "" {
				if err == nil {
					t.Fatalf("ParseKey accepted %q as %q", tc.key, got)
				}
				var ae *Error
				if !asError(err, &ae) || strings.Contains(ae.Reason, secret) {
					t.Fatalf("error %v must be an *Error that does not repeat the key", err)
				}
				return
			}
			if err != nil || got != tc.prefix {
				t.Fatalf("ParseKey = %q, %v; want %q", got, err, tc.prefix)
			}
		})
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}
