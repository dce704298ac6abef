// Package engines opens a store.Store by driver name, so that binaries choose
// the engine from configuration without importing both engines themselves.
package engines

import (
	"context"
	"fmt"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/postgres"
	"github.com/posture-dev/posture/internal/store/sqlite"
)

// Drivers lists the accepted driver names.
var Drivers = []string{"sqlite", "postgres"}

// Open opens the named engine: "sqlite" takes a file path, "postgres" a DSN.
func Open(ctx context.Context, driver, dsn string) (store.Store, error) {
	switch driver {
	case "sqlite":
		if dsn == "" {
			return nil, fmt.Errorf("the sqlite store needs a database file path (--store-dsn or POSTURE_STORE_DSN)")
		}
		return sqlite.Open(ctx, dsn)
	case "postgres":
		if dsn == "" {
			return nil, fmt.Errorf("the postgres store needs a DSN (--store-dsn or POSTURE_STORE_DSN)")
		}
		return postgres.Open(ctx, dsn)
	}
	return nil, fmt.Errorf("unknown store driver %q: use sqlite or postgres", driver)
}
