package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// PutBlob implements store.Store.
func (s *Store) PutBlob(ctx context.Context, tenant string, r io.Reader) (store.Blob, error) {
	return s.PutReport(ctx, tenant, r, nil)
}

// PutReport implements store.Store.
func (s *Store) PutReport(ctx context.Context, tenant string, r io.Reader, accounts func() ([]store.Account, error)) (store.Blob, error) {
	id := uuid.NewString()
	if _, err := s.w.ExecContext(ctx,
		`INSERT INTO blobs (id, tenant, created_at, touched_at) VALUES (?1, ?2, ?3, ?3)`,
		id, tenant, micros(time.Now())); err != nil {
		return store.Blob{}, fmt.Errorf("sqlite: put blob: %w", err)
	}
	b, err := s.writeChunks(ctx, id, r, accounts)
	if err != nil {
		// The blob is incomplete, so no reader sees it; its removal runs
		// in the background, since the caller's answer (a 413 at the
		// limit) must not wait for up to a GiB to be deleted.
		s.discards.Add(id)
		return store.Blob{}, err
	}
	return b, nil
}

func (s *Store) writeChunks(ctx context.Context, id string, r io.Reader, accounts func() ([]store.Account, error)) (store.Blob, error) {
	c, err := engine.CopyChunks(r, func(seq int, data []byte) error {
		if _, err := s.w.ExecContext(ctx, `INSERT INTO blob_chunks (blob_id, seq, data) VALUES (?1, ?2, ?3)`, id, seq, data); err != nil {
			return fmt.Errorf("chunk %d: %w", seq, err)
		}
		return nil
	}, func(now time.Time) error {
		_, err := s.w.ExecContext(ctx, `UPDATE blobs SET touched_at = ?1 WHERE id = ?2`, micros(now), id)
		return err
	})
	if err != nil {
		return store.Blob{}, fmt.Errorf("sqlite: put blob %s: %w", id, err)
	}
	b := store.Blob{ID: id, Size: c.Size, SHA256: c.SHA256}
	var stored sql.NullString
	if accounts != nil {
		list, err := accounts()
		if err != nil {
			return store.Blob{}, fmt.Errorf("sqlite: put blob %s: accounts: %w", id, err)
		}
		if stored.String, err = engine.EncodeAccounts(list); err != nil {
			return store.Blob{}, fmt.Errorf("sqlite: put blob %s: %w", id, err)
		}
		stored.Valid = true
	}
	res, err := s.w.ExecContext(ctx,
		`UPDATE blobs SET size = ?1, sha256 = ?2, chunks = ?3, accounts = ?4, complete = 1 WHERE id = ?5`,
		b.Size, b.SHA256, c.Chunks, stored, id)
	if err != nil {
		return store.Blob{}, fmt.Errorf("sqlite: put blob: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.Blob{}, fmt.Errorf("sqlite: put blob %s: swept as stalled before it completed", id)
	}
	return b, nil
}

// OpenBlob implements store.Store.
func (s *Store) OpenBlob(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	var chunks int
	var size int64
	err := s.r.QueryRowContext(ctx,
		`SELECT chunks, size FROM blobs WHERE id = ?1 AND tenant = ?2 AND complete = 1`,
		id, tenant).Scan(&chunks, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: open blob: %w", err)
	}
	return &blobReader{ctx: ctx, db: s.r, id: id, chunks: chunks, size: size}, nil
}

// BlobAccounts implements store.Store.
func (s *Store) BlobAccounts(ctx context.Context, tenant, id string) ([]store.Account, bool, error) {
	var stored sql.NullString
	err := s.r.QueryRowContext(ctx,
		`SELECT accounts FROM blobs WHERE id = ?1 AND tenant = ?2 AND complete = 1`,
		id, tenant).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, store.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: blob %s accounts: %w", id, err)
	}
	if !stored.Valid {
		return nil, false, nil
	}
	a, err := engine.DecodeAccounts(id, stored.String)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: %w", err)
	}
	return a, true, nil
}

// RecordBlobAccounts implements store.Store.
func (s *Store) RecordBlobAccounts(ctx context.Context, tenant, id string, accounts []store.Account) error {
	enc, err := engine.EncodeAccounts(accounts)
	if err != nil {
		return fmt.Errorf("sqlite: blob %s: %w", id, err)
	}
	res, err := s.w.ExecContext(ctx,
		`UPDATE blobs SET accounts = coalesce(accounts, ?1) WHERE id = ?2 AND tenant = ?3 AND complete = 1`,
		enc, id, tenant)
	if err != nil {
		return fmt.Errorf("sqlite: record the accounts of blob %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// blobReader holds at most one chunk in memory.
type blobReader struct {
	ctx    context.Context
	db     *sql.DB
	id     string
	chunks int
	size   int64
	next   int
	read   int64
	cur    []byte
	closed bool
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("sqlite: read of closed blob")
	}
	for len(b.cur) == 0 {
		if b.next == b.chunks {
			if b.read != b.size {
				return 0, fmt.Errorf("sqlite: blob %s: read %d of %d bytes: %w", b.id, b.read, b.size, io.ErrUnexpectedEOF)
			}
			return 0, io.EOF
		}
		err := b.db.QueryRowContext(b.ctx,
			`SELECT data FROM blob_chunks WHERE blob_id = ?1 AND seq = ?2`,
			b.id, b.next).Scan(&b.cur)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("sqlite: blob %s deleted while reading: %w", b.id, store.ErrNotFound)
		}
		if err != nil {
			return 0, fmt.Errorf("sqlite: read blob %s: %w", b.id, err)
		}
		b.next++
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	b.read += int64(n)
	return n, nil
}

func (b *blobReader) Close() error {
	b.closed, b.cur = true, nil
	return nil
}

// DeleteBlob implements store.Store. The blob is marked incomplete in one
// short write, so no reader opens it from then on; its chunks
// are deleted in the background, a few at a time, so neither the caller nor
// other writers wait behind a large report's deletion. If the process ends
// first, the upload sweeper finds the blob once it is stale.
func (s *Store) DeleteBlob(ctx context.Context, tenant, id string) error {
	// touched_at now: the sweeper leaves it to the discard unless the
	// process ends before that is done.
	res, err := s.w.ExecContext(ctx, `UPDATE blobs SET complete = 0, touched_at = ?3 WHERE id = ?1 AND tenant = ?2 AND complete = 1`, id, tenant, micros(time.Now()))
	if err != nil {
		return fmt.Errorf("sqlite: delete blob %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	s.discards.Add(id)
	return nil
}

// removeBlob deletes an incomplete blob's chunks DiscardBatch at a time,
// each batch its own short transaction, then its row, then hands the freed
// pages back to the file system.
func (s *Store) removeBlob(ctx context.Context, id string) error {
	for {
		res, err := s.w.ExecContext(ctx, `DELETE FROM blob_chunks WHERE blob_id = ?1 AND seq IN
			(SELECT seq FROM blob_chunks WHERE blob_id = ?1 ORDER BY seq LIMIT ?2)`, id, engine.DiscardBatch)
		if err != nil {
			return fmt.Errorf("sqlite: remove blob %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			break
		}
	}
	// An upload still writing (a sweep of a stalled one) may have added a
	// chunk since: the row's cascade takes it.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM blobs WHERE id = ?1 AND complete = 0`, id); err != nil {
		return fmt.Errorf("sqlite: remove blob %s: %w", id, err)
	}
	return s.reclaim(ctx)
}

// SweepIncompleteBlobs implements store.Janitor.
func (s *Store) SweepIncompleteBlobs(ctx context.Context, before time.Time) (int, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT id FROM blobs WHERE complete = 0 AND touched_at < ?1`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("sqlite: sweep incomplete blobs: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlite: sweep incomplete blobs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("sqlite: sweep incomplete blobs: %w", err)
	}
	for i, id := range ids {
		if err := s.removeBlob(ctx, id); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// reclaimStep is how many free pages one step of the incremental vacuum
// hands back: a few MiB, one short write each.
const reclaimStep = 1024

// reclaim hands the pages that deletions freed back to the file system
// (auto_vacuum is INCREMENTAL); without it the file never shrinks. It runs in
// steps of reclaimStep pages, each its own write, so a GiB of freed pages
// does not hold the write lock for minutes. The passive checkpoint then
// copies the shrunken database out of the WAL, which is what truncates the
// file; it never waits for readers.
func (s *Store) reclaim(ctx context.Context) error {
	last := -1
	for {
		// The pragma frees one page per step of its statement: it must be
		// read to the end (an Exec steps it once).
		rows, err := s.w.QueryContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, reclaimStep))
		if err != nil {
			return fmt.Errorf("sqlite: incremental vacuum: %w", err)
		}
		for rows.Next() {
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("sqlite: incremental vacuum: %w", err)
		}
		var free int
		if err := s.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return fmt.Errorf("sqlite: incremental vacuum: %w", err)
		}
		// A database without incremental auto-vacuum frees nothing.
		if free == 0 || free == last {
			break
		}
		last = free
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	return nil
}

// CountBlobs counts the tenant's blob rows, complete or not, and their chunks,
// once the removals of failed uploads in progress have ended. It exists so
// tests can prove that a failed upload left nothing behind.
func (s *Store) CountBlobs(ctx context.Context, tenant string) (blobs, chunks int, err error) {
	if err := s.discards.Wait(ctx); err != nil {
		return 0, 0, err
	}
	err = s.r.QueryRowContext(ctx,
		`SELECT (SELECT count(*) FROM blobs WHERE tenant = ?1),
		        (SELECT count(*) FROM blob_chunks c JOIN blobs b ON b.id = c.blob_id WHERE b.tenant = ?1)`,
		tenant).Scan(&blobs, &chunks)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: count blobs: %w", err)
	}
	return blobs, chunks, nil
}

func (s *Store) purgeIncompleteBlobs(ctx context.Context) error {
	_, err := s.SweepIncompleteBlobs(ctx, time.Now().Add(-engine.IncompleteBlobTTL))
	return err
}
