package sqlite_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
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

// dbSize is the database file plus its WAL: what the store takes on disk.
func dbSize(t *testing.T, path string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// Deleted reports must give their space back to the file system, not leave
// free pages inside a file that never shrinks.
func TestDeletedBlobsShrinkTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "posture.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	empty := dbSize(t, path)
	var ids []string
	for i := range 20 {
		b, err := s.PutBlob(ctx, "t", io.LimitReader(rand.NewChaCha8([32]byte{byte(i)}), 3<<20))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	full := dbSize(t, path)
	if full < 60<<20 {
		t.Fatalf("20 blobs of 3 MiB take %d bytes on disk, want at least 60 MiB", full)
	}
	for _, id := range ids {
		if err := s.DeleteBlob(ctx, "t", id); err != nil {
			t.Fatal(err)
		}
	}
	// The chunks go in the background; CountBlobs waits for that.
	if blobs, chunks, err := s.CountBlobs(ctx, "t"); err != nil || blobs != 0 || chunks != 0 {
		t.Fatalf("after deleting every blob the store holds %d blobs and %d chunks (%v)", blobs, chunks, err)
	}
	after := dbSize(t, path)
	t.Logf("empty %d bytes, with 20 blobs %d, after deleting them %d", empty, full, after)
	if after > empty+8<<20 {
		t.Fatalf("after deleting every blob the store takes %d bytes on disk (%d with them, %d empty)", after, full, empty)
	}
}

// TestDatabaseFilesArePrivate: the database and its -wal and -shm files
// hold every tenant's reports, so only their owner may read them (make dev's
// .dev/posture.db among them), whether Open creates them or finds them left
// 0644 by an earlier release.
func TestDatabaseFilesArePrivate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, path string)
	}{
		{"a new database", func(*testing.T, string) {}},
		{"a database left 0644", func(t *testing.T, path string) {
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if _, err := s.PutBlob(ctx, "t", io.LimitReader(rand.NewChaCha8([32]byte{}), 1<<10)); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Still open, so its -wal and -shm files stay, as after an
			// unclean stop.
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "posture.db")
			tc.before(t, path)
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.PutBlob(ctx, "t", io.LimitReader(rand.NewChaCha8([32]byte{1}), 1<<10)); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(p), err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s is %v, want -rw-------", filepath.Base(p), fi.Mode().Perm())
				}
			}
		})
	}
}
