package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store/pgtest"
	"github.com/posture-dev/posture/internal/store/postgres"
	"github.com/posture-dev/posture/internal/store/storetest"
)

// go test -run '^$' -bench WriteBatch -benchtime 20x ./internal/store/postgres/
// Set POSTURE_TEST_POSTGRES_DSN to measure against a real server: the
// throwaway one runs with fsync off.
func BenchmarkWriteBatch(b *testing.B) {
	storetest.BenchWriteBatch(b, openFresh(b))
}

// go test -run '^$' -bench Reads -benchtime 20x ./internal/store/postgres/
func BenchmarkReads(b *testing.B) {
	dsn := pgtest.FreshDatabase(b)
	s, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchReads(b, s, 100_000, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "VACUUM ANALYZE findings")
		return err
	})
}
