package postgres_test

import (
	"testing"

	"github.com/posture-dev/posture/internal/store/storetest"
)

// go test -run '^$' -bench WriteBatch -benchtime 20x ./internal/store/postgres/
// Set POSTURE_TEST_POSTGRES_DSN to measure against a real server: the
// throwaway one runs with fsync off.
func BenchmarkWriteBatch(b *testing.B) {
	storetest.BenchWriteBatch(b, openFresh(b))
}
