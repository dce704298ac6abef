package auth

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// TestKeyEndIsFinal covers the moments the controller has not caught up
// with yet: the authenticator alone must refuse a key whose spec or status
// says it ended, and must not take a later spec.expiresAt on trust.
func TestKeyEndIsFinal(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { v := metav1.NewTime(now.Add(d)); return &v }
	for _, tc := range []struct {
		name      string
		spec      posturev1.APIKeySpec
		status    posturev1.APIKeyStatus
		revoked   bool
		expiresAt time.Time
	}{
		{"live, default expiry", posturev1.APIKeySpec{}, posturev1.APIKeyStatus{ExpiresAt: at(time.Hour)}, false, now.Add(time.Hour)},
		{"spec.expiresAt shortened, not yet recorded", posturev1.APIKeySpec{ExpiresAt: at(-time.Minute)}, posturev1.APIKeyStatus{ExpiresAt: at(time.Hour)}, false, now.Add(-time.Minute)},
		{"spec.expiresAt lengthened after expiry, not yet recorded", posturev1.APIKeySpec{ExpiresAt: at(time.Hour)}, posturev1.APIKeyStatus{ExpiresAt: at(-time.Minute)}, false, now.Add(-time.Minute)},
		{"spec.expiresAt lengthened after the expiry was recorded", posturev1.APIKeySpec{ExpiresAt: at(time.Hour)}, posturev1.APIKeyStatus{ExpiresAt: at(time.Hour), ExpiredAt: at(-time.Minute)}, false, now.Add(-time.Minute)},
		{"revoked in spec, not yet recorded", posturev1.APIKeySpec{Revoked: true}, posturev1.APIKeyStatus{ExpiresAt: at(time.Hour)}, true, now.Add(time.Hour)},
		{"revocation recorded, spec.revoked false", posturev1.APIKeySpec{}, posturev1.APIKeyStatus{ExpiresAt: at(time.Hour), RevokedAt: at(-time.Minute)}, true, now.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &posturev1.APIKey{Spec: tc.spec, Status: tc.status}
			if got := Revoked(k); got != tc.revoked {
				t.Errorf("Revoked = %v, want %v", got, tc.revoked)
			}
			if got := ExpiresAt(k); got == nil || !got.Equal(tc.expiresAt) {
				t.Errorf("ExpiresAt = %v, want %v", got, tc.expiresAt)
			}
		})
	}
}
