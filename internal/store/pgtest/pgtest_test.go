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

// TestStartSettings checks that the settings given to Start are in force,
// both a new one and one that overrides a default of Start's own.
func TestStartSettings(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) != "" {
		t.Skip("an external server is configured")
	}
	dsn, stop, err := pgtest.Start("work_mem=7MB", "max_connections=37")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, c := range []struct{ name, want string }{
		{"work_mem", "7MB"},
		{"max_connections", "37"},
	} {
		var got string
		if err := conn.QueryRow(ctx, "SHOW "+c.name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("SHOW %s = %s, want %s", c.name, got, c.want)
		}
	}
	if _, _, err := pgtest.Start("work_mem"); err == nil {
		t.Error("Start accepted a setting without a value")
	}
}
