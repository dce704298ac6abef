// Package postgres is the PostgreSQL store engine (pgx/v5), for clusters and
// multi-replica installs.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the PostgreSQL engine of store.Store.
type Store struct {
	pool *pgxpool.Pool
	lz4  bool // the server can compress with lz4
	// discards removes failed uploads off their request.
	discards *engine.Discards
	// leftOut are the read structures WriteBatch does not maintain
	// (LeaveOut, for the bench alone).
	leftOut map[string]bool
}

var (
	_ store.Store              = (*Store)(nil)
	_ store.Janitor            = (*Store)(nil)
	_ store.Sessions           = (*Store)(nil)
	_ store.SearchIndexFlusher = (*Store)(nil)
	_ store.StructureLeaver    = (*Store)(nil)
)

// Open connects to dsn (URL or keyword/value form, as pgx accepts), applies
// the migrations and returns the store. Replicas may call Open at the same
// time: migrations are serialised by an advisory lock.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DSN: %w", err)
	}
	// Every timestamp the store returns is UTC; asking the server for UTC
	// keeps text renderings (logs, psql) consistent with it too.
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	// JIT compilation pays off for queries that run for seconds; the
	// store's run for milliseconds, and PostgreSQL compiles whenever a
	// plan's estimated cost passes jit_above_cost, which the reads of the
	// latest view do at a million findings (the loop over the latest scans
	// is costed as a quarter of the tenant): 60–100 ms of compilation for a
	// 40 ms page. A DSN that sets jit keeps its setting.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool}
	s.discards = engine.NewDiscards(s.removeBlob)
	// No row before PostgreSQL 14, which has no lz4 either.
	err = pool.QueryRow(ctx, `SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'`).Scan(&s.lz4)
	if err != nil && !isNoRows(err) {
		pool.Close()
		return nil, fmt.Errorf("postgres: probe lz4: %w", err)
	}
	if s.lz4 {
		// New findings are COPYed straight into the table: compress their
		// raw records with lz4 there too (a catalog change only; idempotent).
		if _, err := pool.Exec(ctx, `ALTER TABLE findings ALTER COLUMN raw SET COMPRESSION lz4`); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: set raw compression: %w", err)
		}
	}
	if err := s.purgeIncompleteBlobs(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	// Out of order: versions are numbered by the change that adds them, and
	// one merged after a later one was applied still has to run.
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithSessionLocker(locker), goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.discards.Close()
	s.pool.Close()
	return nil
}

func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// isNoRows reports pgx's "no rows" error.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// isDeadlock reports PostgreSQL aborting a transaction to break a cycle of
// lock waits.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// isInvalidText reports PostgreSQL rejecting a malformed value (a bad UUID),
// which for a lookup means "no such row".
func isInvalidText(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02"
}

// LeaveOut implements store.StructureLeaver.
func (s *Store) LeaveOut(structures ...string) {
	s.leftOut = map[string]bool{}
	for _, st := range structures {
		s.leftOut[st] = true
	}
}
