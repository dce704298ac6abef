package postgres_test

import (
	"context"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/pgtest"
	"github.com/posture-dev/posture/internal/store/postgres"
	"github.com/posture-dev/posture/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openFresh(t testing.TB) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.FreshDatabase(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
}
