package auth

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPasswordMatch(t *testing.T) {
	hashed, err := bcrypt.GenerateFromPassword([]byte("s3cret-Passw0rd"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100)
	secret := func(v string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + v[:min(len(v), 8)]), ResourceVersion: "1"},
			Data:       map[string][]byte{"password": []byte(v)},
		}
	}
	for _, tc := range []struct {
		name     string
		sec      *corev1.Secret
		key      string
		given    string
		accepted bool
	}{
		{"plaintext right", secret("s3cret-Passw0rd"), "password", "s3cret-Passw0rd", true},
		{"plaintext wrong", secret("s3cret-Passw0rd"), "password", "s3cret-Passw0rD", false},
		{"plaintext with trailing newline (kubectl --from-file)", secret("s3cret-Passw0rd\n"), "password", "s3cret-Passw0rd", true},
		{"plaintext empty given", secret("s3cret-Passw0rd"), "password", "", false},
		{"plaintext longer than bcrypt's 72 bytes", secret(long), "password", long, true},
		{"plaintext longer than 72 bytes, differing after byte 72", secret(long), "password", long[:99] + "y", false},
		{"bcrypt hash right", secret(string(hashed)), "password", "s3cret-Passw0rd", true},
		{"bcrypt hash wrong", secret(string(hashed)), "password", "wrong", false},
		{"bcrypt hash given verbatim", secret(string(hashed)), "password", string(hashed), false},
		{"missing key", secret("s3cret-Passw0rd"), "other", "s3cret-Passw0rd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p passwords
			for range 2 { // the second round uses the cached hash
				if got := p.match(tc.sec, tc.key, tc.given, bcrypt.MinCost); got != tc.accepted {
					t.Fatalf("match = %v, want %v", got, tc.accepted)
				}
			}
		})
	}
}

func TestPasswordCacheFollowsSecretRevision(t *testing.T) {
	var p passwords
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "1"}, Data: map[string][]byte{"password": []byte("old-password")}}
	if !p.match(sec, "password", "old-password", bcrypt.MinCost) {
		t.Fatal("old password refused")
	}
	sec.Data["password"], sec.ResourceVersion = []byte("new-password"), "2"
	if p.match(sec, "password", "old-password", bcrypt.MinCost) {
		t.Fatal("the old password still works after the Secret changed")
	}
	if !p.match(sec, "password", "new-password", bcrypt.MinCost) {
		t.Fatal("new password refused")
	}
	for id, h := range p.hashes {
		if !isBcrypt(h) || strings.Contains(string(h), "new-password") {
			t.Fatalf("the cache entry %s is not a bcrypt hash", id)
		}
	}
}
