package pgtest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestFreshDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.FreshDatabase(t), pgtest.FreshDatabase(t)
	if a == b {
		t.Fatalf("same DSN twice: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("table visible in the other database: n=%d err=%v", n, err)
	}
	var version string
	if err := ca.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s", version)
}

func TestStartStop(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) != "" {
		t.Skip("an external server is configured")
	}
	dsn, stop, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	// The socket directory is the host in the DSN.
	host := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(dsn)[0], "host='"), "'")
	if _, err := os.Stat(host); err != nil {
		t.Fatalf("server directory: %v", err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	stop()
	stop() // idempotent
	if _, err := os.Stat(host); !os.IsNotExist(err) {
		t.Fatalf("server directory %s still there after stop: %v", host, err)
	}
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Fatal("server still answers after stop")
	}
}
