package sqlite_test

import (
	"testing"

	"github.com/posture-dev/posture/internal/store/storetest"
)

// go test -run '^$' -bench WriteBatch -benchtime 20x ./internal/store/sqlite/
func BenchmarkWriteBatch(b *testing.B) {
	storetest.BenchWriteBatch(b, openTemp(b))
}

// go test -run '^$' -bench Reads -benchtime 20x ./internal/store/sqlite/
func BenchmarkReads(b *testing.B) {
	storetest.BenchReads(b, openTemp(b), 100_000, nil)
}
