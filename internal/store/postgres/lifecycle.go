package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// DeleteRun implements store.Store. Deleting the run row waits for the
// writes in flight (each holds a key share lock on it), so no error row of
// the ingestion lands after the delete.
func (s *Store) DeleteRun(ctx context.Context, tenant, ingestionID string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE tenant = $1 AND ingestion_id = $2`, tenant, ingestionID); err != nil {
			return fmt.Errorf("postgres: delete the run of ingestion %s: %w", ingestionID, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM ingestion_errors WHERE tenant = $1 AND ingestion_id = $2`, tenant, ingestionID); err != nil {
			return fmt.Errorf("postgres: delete the error rows of ingestion %s: %w", ingestionID, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM ingestion_scans WHERE tenant = $1 AND ingestion_id = $2`, tenant, ingestionID); err != nil {
			return fmt.Errorf("postgres: delete the scans recorded for ingestion %s: %w", ingestionID, err)
		}
		return nil
	})
}

// DeleteTenantData implements store.Store.
func (s *Store) DeleteTenantData(ctx context.Context, tenant string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, table := range engine.TenantTables {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE tenant = $1`, tenant); err != nil {
				return fmt.Errorf("postgres: delete tenant %s's rows of %s: %w", tenant, table, err)
			}
		}
		return nil
	})
}
