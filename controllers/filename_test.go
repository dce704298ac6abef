package controllers

import (
	"strings"
	"testing"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/termsafe"
)

// TestFileNameInEvents: an Ingestion stored before the CRD refused control
// characters and bidi overrides must still not put one in an event message,
// where kubectl would print it raw to whoever reads the events: it is shown
// escaped, as table cells are (termsafe).
func TestFileNameInEvents(t *testing.T) {
	cases := []struct{ stored, shown string }{
		{"report.ocsf.json", "report.ocsf.json"},
		{"rapport-été.ocsf.json", "rapport-été.ocsf.json"},
		{"x\x1b[2J\r\nforged line\a.ocsf.json", `x\x1b[2J\x0d\x0aforged line\x07.ocsf.json`},
		{"a\x00\t\x7f\u0085\u009b.ocsf.json", `a\x00\x09\x7f\u0085\u009b.ocsf.json`},
		{"invoice\u202Eexe.ocsf.json", `invoice\u202eexe.ocsf.json`},
	}
	for _, tc := range cases {
		ing := &posturev1.Ingestion{Spec: posturev1.IngestionSpec{Source: posturev1.IngestionSource{
			Upload: &posturev1.UploadSource{Filename: tc.stored}}}}
		got := fileName(ing)
		if got != tc.shown {
			t.Errorf("fileName(%q) = %q, want %q", tc.stored, got, tc.shown)
		}
		if strings.ContainsFunc(got, termsafe.Unsafe) {
			t.Errorf("fileName(%q) = %q keeps a control character", tc.stored, got)
		}
	}
}
