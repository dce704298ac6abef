package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/store/storetest"
)

func openTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "posture.db"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

// The in-memory mode shares one connection between readers and the writer;
// the suite proves that nothing deadlocks on it.
func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), ":memory:")
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "posture.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartRun(ctx, "t", "ing", 1, 5); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Migrations must be a no-op the second time.
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.GetRun(ctx, "t", "ing")
	if err != nil || r.Total != 5 {
		t.Fatalf("GetRun after reopen = %+v, %v", r, err)
	}
}
