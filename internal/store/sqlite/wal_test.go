package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTruncateWALNeverWaitsForReaders: with a reader inside a read
// transaction on the WAL, the checkpoint that empties the WAL gives up at
// once rather than hold the write lock for the busy timeout, and the writer
// waits for its lock again afterwards.
func TestTruncateWALNeverWaitsForReaders(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "wal.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.PutBlob(ctx, "t", strings.NewReader(strings.Repeat("x", 1<<20))); err != nil {
		t.Fatal(err)
	}
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blob_chunks`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("reader sees %d chunks (%v)", n, err)
	}
	// A write after the reader's snapshot keeps the reader on the WAL.
	if _, err := s.PutBlob(ctx, "t", strings.NewReader("y")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.truncateWAL(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > busyTimeout/2 {
		t.Fatalf("the checkpoint waited %v for the reader", took)
	}
	var timeout int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != busyTimeout.Milliseconds() {
		t.Fatalf("the writer's busy_timeout is %d ms after the checkpoint, want %d", timeout, busyTimeout.Milliseconds())
	}
}
