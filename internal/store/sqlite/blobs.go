package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
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
		// The caller's context is often the reason we failed; the clean-up
		// must still run.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, derr := s.w.ExecContext(cctx, `DELETE FROM blobs WHERE id = ?1`, id); derr != nil {
			err = errors.Join(err, fmt.Errorf("sqlite: remove failed upload %s: %w", id, derr))
		}
		return store.Blob{}, err
	}
	return b, nil
}

func (s *Store) writeChunks(ctx context.Context, id string, r io.Reader, accounts func() ([]store.Account, error)) (store.Blob, error) {
	h := sha256.New()
	buf := make([]byte, engine.ChunkSize)
	var size int64
	seq := 0
	touched := time.Now()
	for {
		n, rerr := engine.ReadChunk(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			// One short transaction per chunk: an upload is as slow as its
			// client, and must not hold the database's only write lock.
			if _, err := s.w.ExecContext(ctx,
				`INSERT INTO blob_chunks (blob_id, seq, data) VALUES (?1, ?2, ?3)`,
				id, seq, buf[:n]); err != nil {
				return store.Blob{}, fmt.Errorf("sqlite: put blob %s chunk %d: %w", id, seq, err)
			}
			if now := time.Now(); now.Sub(touched) >= engine.TouchInterval {
				// Tells the sweep this upload is alive.
				if _, err := s.w.ExecContext(ctx, `UPDATE blobs SET touched_at = ?1 WHERE id = ?2`, micros(now), id); err != nil {
					return store.Blob{}, fmt.Errorf("sqlite: put blob %s: %w", id, err)
				}
				touched = now
			}
			seq++
			size += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return store.Blob{}, fmt.Errorf("sqlite: put blob: read: %w", rerr)
		}
	}
	b := store.Blob{ID: id, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}
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
		b.Size, b.SHA256, seq, stored, id)
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

// DeleteBlob implements store.Store.
func (s *Store) DeleteBlob(ctx context.Context, tenant, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM blobs WHERE id = ?1 AND tenant = ?2 AND complete = 1`, id, tenant)
	if err != nil {
		return fmt.Errorf("sqlite: delete blob %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return s.reclaim(ctx)
}

// SweepIncompleteBlobs implements store.Janitor.
func (s *Store) SweepIncompleteBlobs(ctx context.Context, before time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM blobs WHERE complete = 0 AND touched_at < ?1`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("sqlite: sweep incomplete blobs: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, nil
	}
	return int(n), s.reclaim(ctx)
}

// reclaim hands the pages that deletions freed back to the file system
// (auto_vacuum is INCREMENTAL); without it the file never shrinks. The
// passive checkpoint then copies the shrunken database out of the WAL, which
// is what truncates the file; it never waits for readers. The deletion has
// committed by now, so a caller giving up (a manager shutting down) must not
// cut its clean-up short and see an error for a delete that happened.
func (s *Store) reclaim(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	// The pragma frees one page per step of its statement: it must be read
	// to the end (an Exec steps it once).
	rows, err := s.w.QueryContext(ctx, `PRAGMA incremental_vacuum`)
	if err != nil {
		return fmt.Errorf("sqlite: incremental vacuum: %w", err)
	}
	for rows.Next() {
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("sqlite: incremental vacuum: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	return nil
}

// CountBlobs counts the tenant's blob rows, complete or not, and their chunks.
// It exists so tests can prove that a failed upload left nothing behind.
func (s *Store) CountBlobs(ctx context.Context, tenant string) (blobs, chunks int, err error) {
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
