package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

func TestPragmas(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mode string
	var fk, busy int
	for name, d := range map[string]*sql.DB{"writer": s.w, "reader": s.r} {
		if err := d.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("%s: journal_mode %q, %v", name, mode, err)
		}
		if err := d.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
			t.Errorf("%s: foreign_keys %d, %v", name, fk, err)
		}
		if err := d.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil || busy != int(busyTimeout.Milliseconds()) {
			t.Errorf("%s: busy_timeout %d, %v", name, busy, err)
		}
	}
	if s.r == s.w {
		t.Fatal("a file database must have a separate reader pool")
	}
}

// TestReadDuringWrite holds the write lock in an open transaction and checks
// that readers neither wait for it nor see its uncommitted rows.
func TestReadDuringWrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.StartRun(ctx, "t", "committed", 1, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (tenant, ingestion_id, attempt, status, started_at, updated_at)
		VALUES ('t', 'uncommitted', 1, 'running', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.GetRun(ctx, "t", "committed"); err != nil {
		t.Fatalf("read during write: %v", err)
	}
	if _, err := s.GetRun(ctx, "t", "uncommitted"); err == nil {
		t.Fatal("reader saw an uncommitted row")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("reads waited %v for the writer", d)
	}
}
