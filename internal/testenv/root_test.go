package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRootOfATrimmedBinary: make dev builds devenv with -trimpath, whose
// compiled paths are the module's, not the disk's; the root is then found
// from the working directory, by this module's go.mod.
func TestRootOfATrimmedBinary(t *testing.T) {
	repo := Root()
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trimmed := modulePath + "/internal/testenv/testenv.go"
	for _, tc := range []struct {
		name, file, wd, want string
	}{
		{"a binary built in place", filepath.Join(repo, "internal", "testenv", "testenv.go"), other, repo},
		{"trimmed, run at the root (make dev)", trimmed, repo, repo},
		{"trimmed, run below the root", trimmed, filepath.Join(repo, "hack", "devenv"), repo},
		{"trimmed, run in another module", trimmed, filepath.Join(other, "sub"), filepath.Join(other, "sub")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rootFrom(tc.file, tc.wd); got != tc.want {
				t.Errorf("rootFrom(%q, %q) = %q, want %q", tc.file, tc.wd, got, tc.want)
			}
		})
	}
}
