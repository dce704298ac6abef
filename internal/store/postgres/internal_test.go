package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/pgtest"
)

// Replicas start together; the advisory lock must serialise their
// migrations.
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.FreshDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(context.Background(), dsn)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRawCompressedWithLZ4(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.lz4 {
		t.Skip("server built without lz4")
	}
	if err := s.StartRun(ctx, "t", "ing", 1, 1); err != nil {
		t.Fatal(err)
	}
	// Random hex compresses to well over the 2 KB that TOAST moves out of line.
	noise := make([]byte, 4000)
	rand.Read(noise)
	raw := fmt.Appendf(nil, `{"noise":"%x"}`, noise)
	f := store.Finding{UID: "u", ScanID: "s", Raw: raw}
	if err := s.WriteBatch(ctx, "t", "ing", 1, store.Batch{Findings: []store.Finding{f}}); err != nil {
		t.Fatal(err)
	}
	var method string
	if err := s.pool.QueryRow(ctx, `SELECT pg_column_compression(raw) FROM findings`).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method != "lz4" {
		t.Fatalf("raw compressed with %q, want lz4", method)
	}
	// Re-writing an unchanged record keeps its stored (TOASTed) value.
	var before, after string
	s.pool.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid)::text FROM pg_class WHERE relname = 'findings'`).Scan(&before)
	for range 20 {
		if err := s.WriteBatch(ctx, "t", "ing", 1, store.Batch{Findings: []store.Finding{f}}); err != nil {
			t.Fatal(err)
		}
	}
	s.pool.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid)::text FROM pg_class WHERE relname = 'findings'`).Scan(&after)
	if before == "0" {
		t.Fatal("raw was not TOASTed: the test proves nothing")
	}
	if before != after {
		t.Errorf("TOAST grew from %s to %s bytes re-writing an unchanged record", before, after)
	}
}
