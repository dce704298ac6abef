package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// DeleteRun implements store.Store.
func (s *Store) DeleteRun(ctx context.Context, tenant, ingestionID string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ingestion_errors WHERE tenant = ?1 AND ingestion_id = ?2`, tenant, ingestionID); err != nil {
			return fmt.Errorf("sqlite: delete the error rows of ingestion %s: %w", ingestionID, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE tenant = ?1 AND ingestion_id = ?2`, tenant, ingestionID); err != nil {
			return fmt.Errorf("sqlite: delete the run of ingestion %s: %w", ingestionID, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM ingestion_scans WHERE tenant = ?1 AND ingestion_id = ?2`, tenant, ingestionID); err != nil {
			return fmt.Errorf("sqlite: delete the scans recorded for ingestion %s: %w", ingestionID, err)
		}
		return nil
	})
}

// DeleteTenantData implements store.Store.
func (s *Store) DeleteTenantData(ctx context.Context, tenant string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, table := range engine.TenantTables {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE tenant = ?1`, tenant); err != nil {
				return fmt.Errorf("sqlite: delete tenant %s's rows of %s: %w", tenant, table, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The rows are gone; a caller giving up must not see an error for
	// handing their pages back.
	return s.reclaim(context.WithoutCancel(ctx))
}
