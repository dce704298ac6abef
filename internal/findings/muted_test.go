package findings

import (
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

// TestMuted: the current state leaves muted findings out unless asked, the
// history lists them all, and an unknown value is refused.
func TestMuted(t *testing.T) {
	tests := []struct {
		v           string
		set, latest bool
		want        string
		ok          bool
	}{
		{latest: true, want: store.MutedExcluded, ok: true},
		{want: store.MutedAny, ok: true},
		{v: "any", set: true, latest: true, want: store.MutedAny, ok: true},
		{v: "true", set: true, want: store.MutedOnly, ok: true},
		{v: "false", set: true, want: store.MutedExcluded, ok: true},
		{v: "", set: true, latest: true},
		{v: "yes", set: true},
	}
	for _, tt := range tests {
		got, ok := Muted(tt.v, tt.set, tt.latest)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Muted(%q, set %v, latest %v) = %q, %v; want %q, %v", tt.v, tt.set, tt.latest, got, ok, tt.want, tt.ok)
		}
	}
}
