// Package sqlite is the embedded store engine (modernc.org/sqlite, pure Go):
// the default for local development and single-replica installs.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite engine of store.Store.
type Store struct {
	// SQLite admits one writer at a time; a single writer connection queues
	// writers in Go instead of having them spin on SQLITE_BUSY.
	w *sql.DB
	// r serves reads in parallel with the writer (WAL gives each reader a
	// snapshot). For an in-memory database it is w, because every connection
	// to ":memory:" would be a different database.
	r *sql.DB
	// discards removes failed uploads off their request.
	discards *engine.Discards
	// leftOut are the read structures WriteBatch does not maintain
	// (LeaveOut, for the bench alone).
	leftOut map[string]bool
}

var (
	_ store.Store           = (*Store)(nil)
	_ store.StructureLeaver = (*Store)(nil)
	_ store.Janitor         = (*Store)(nil)
	_ store.Sessions        = (*Store)(nil)
)

// writerCacheKiB is the writer connection's page cache.
const writerCacheKiB = 64 << 10

// busyTimeout covers the rare case of a second process (or a WAL checkpoint)
// holding the lock; within one Store writers never contend.
const busyTimeout = 10 * time.Second

// Open opens (creating if needed) the database at path and applies the
// migrations. path is a file path, or ":memory:" for a private in-memory
// database (one connection, so reads wait for writes).
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite: database path %q must not contain '?'", path)
	}
	memory := path == ":memory:"
	if !memory {
		if err := private(path); err != nil {
			return nil, err
		}
	}
	pragmas := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", busyTimeout.Milliseconds())
	// synchronous=NORMAL is durable against process crashes in WAL mode; only
	// an OS crash can lose the last commits, which a re-run ingestion redoes.
	// BEGIN IMMEDIATE takes the write lock up front, so a transaction never
	// fails half-way when it upgrades from reading to writing.
	// journal_size_limit truncates the WAL after a checkpoint, so the pages a
	// deleted report's vacuum moved through it do not stay on disk there.
	// The writer's page cache (cache_size, in KiB when negative) holds the
	// index pages a batch of new findings lands on; at SQLite's default of
	// 2 MiB it held almost none of them once a tenant had tens of thousands
	// of findings, and each insert read its pages back from the file and
	// wrote dirty ones to the WAL before the batch committed (a third of an
	// ingestion's time, profiled). temp_store keeps a statement's journal in
	// memory.
	w, err := sql.Open("sqlite", path+"?"+pragmas+"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=journal_size_limit(67108864)"+
		fmt.Sprintf("&_pragma=cache_size(%d)&_pragma=temp_store(memory)", -writerCacheKiB)+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	// Closing the only connection would drop an in-memory database.
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w, r: w}
	s.discards = engine.NewDiscards(s.removeBlob)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	if !memory {
		r, err := sql.Open("sqlite", path+"?"+pragmas+"&_pragma=query_only(1)")
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		n := max(4, runtime.NumCPU())
		r.SetMaxOpenConns(n)
		r.SetMaxIdleConns(n)
		s.r = r
	}
	if err := s.purgeIncompleteBlobs(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// private makes the database file readable by its owner alone: it holds
// every tenant's reports and findings. A new file is created 0600, and SQLite
// gives its -wal and -shm files the mode of the database file. An existing
// file (one that an earlier release created 0644) loses its group and other
// bits, and so do its -wal and -shm; a file the process may not change
// (owned by another user) is left as it is.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(p, fi.Mode().Perm()&0o700)
		}
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	// The provider is not closed: Close would close db, which the Store keeps.
	// Out of order: versions are numbered by the change that adds them, and
	// one merged after a later one was applied still has to run.
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// LeaveOut implements store.StructureLeaver.
func (s *Store) LeaveOut(structures ...string) {
	s.leftOut = map[string]bool{}
	for _, st := range structures {
		s.leftOut[st] = true
	}
}

// Close stops the removals of failed uploads in progress and closes the
// database.
func (s *Store) Close() error {
	s.discards.Close()
	var err error
	if s.r != s.w {
		err = s.r.Close()
	}
	return errors.Join(err, s.w.Close())
}

func micros(t time.Time) int64 { return engine.Time(t).UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// inTx runs fn in a write transaction and commits if it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}
