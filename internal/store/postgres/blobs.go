package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// PutBlob implements store.Store.
func (s *Store) PutBlob(ctx context.Context, tenant string, r io.Reader) (store.Blob, error) {
	return s.PutReport(ctx, tenant, r, nil)
}

// PutReport implements store.Store.
func (s *Store) PutReport(ctx context.Context, tenant string, r io.Reader, accounts func() ([]store.Account, error)) (store.Blob, error) {
	id := uuid.New()
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO blobs (id, tenant, created_at, touched_at) VALUES ($1, $2, $3, $3)`,
		id, tenant, engine.Now()); err != nil {
		return store.Blob{}, fmt.Errorf("postgres: put blob: %w", err)
	}
	b, err := s.writeChunks(ctx, id, r, accounts)
	if err != nil {
		// The blob is incomplete, so no reader sees it; its removal runs
		// in the background, since the caller's answer (a 413 at the
		// limit) must not wait for up to a GiB to be deleted.
		s.discards.Add(id.String())
		return store.Blob{}, err
	}
	return b, nil
}

// removeBlob deletes an incomplete blob's chunks DiscardBatch at a time, then
// its row: each statement is short, and none holds a connection long.
func (s *Store) removeBlob(ctx context.Context, id string) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil
	}
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1 AND seq IN
			(SELECT seq FROM blob_chunks WHERE blob_id = $1 ORDER BY seq LIMIT $2)`, uid, engine.DiscardBatch)
		if err != nil {
			return fmt.Errorf("postgres: remove blob %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM blobs WHERE id = $1 AND NOT complete`, uid); err != nil {
		return fmt.Errorf("postgres: remove blob %s: %w", id, err)
	}
	return nil
}

func (s *Store) writeChunks(ctx context.Context, id uuid.UUID, r io.Reader, accounts func() ([]store.Account, error)) (store.Blob, error) {
	c, err := engine.CopyChunks(r, func(seq int, data []byte) error {
		if _, err := s.pool.Exec(ctx, `INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)`, id, seq, data); err != nil {
			return fmt.Errorf("chunk %d: %w", seq, err)
		}
		return nil
	}, func(now time.Time) error {
		_, err := s.pool.Exec(ctx, `UPDATE blobs SET touched_at = $1 WHERE id = $2`, now, id)
		return err
	})
	if err != nil {
		return store.Blob{}, fmt.Errorf("postgres: put blob %s: %w", id, err)
	}
	b := store.Blob{ID: id.String(), Size: c.Size, SHA256: c.SHA256}
	var stored *string
	if accounts != nil {
		list, err := accounts()
		if err != nil {
			return store.Blob{}, fmt.Errorf("postgres: put blob %s: accounts: %w", id, err)
		}
		enc, err := engine.EncodeAccounts(list)
		if err != nil {
			return store.Blob{}, fmt.Errorf("postgres: put blob %s: %w", id, err)
		}
		stored = &enc
	}
	tag, err := s.pool.Exec(ctx,
		`UPDATE blobs SET size = $1, sha256 = $2, chunks = $3, accounts = $4, complete = true WHERE id = $5`,
		b.Size, b.SHA256, c.Chunks, stored, id)
	if err != nil {
		return store.Blob{}, fmt.Errorf("postgres: put blob: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.Blob{}, fmt.Errorf("postgres: put blob %s: swept as stalled before it completed", id)
	}
	return b, nil
}

// OpenBlob implements store.Store.
func (s *Store) OpenBlob(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, store.ErrNotFound
	}
	var chunks int
	var size int64
	err = s.pool.QueryRow(ctx,
		`SELECT chunks, size FROM blobs WHERE id = $1 AND tenant = $2 AND complete`,
		uid, tenant).Scan(&chunks, &size)
	if isNoRows(err) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: open blob: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &blobReader{ctx: ctx, cancel: cancel, pool: s.pool, id: uid, chunks: chunks, size: size}, nil
}

// BlobAccounts implements store.Store.
func (s *Store) BlobAccounts(ctx context.Context, tenant, id string) ([]store.Account, bool, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, false, store.ErrNotFound
	}
	var stored *string
	err = s.pool.QueryRow(ctx,
		`SELECT accounts FROM blobs WHERE id = $1 AND tenant = $2 AND complete`,
		uid, tenant).Scan(&stored)
	if isNoRows(err) {
		return nil, false, store.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: blob %s accounts: %w", id, err)
	}
	if stored == nil {
		return nil, false, nil
	}
	a, err := engine.DecodeAccounts(id, *stored)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: %w", err)
	}
	return a, true, nil
}

// RecordBlobAccounts implements store.Store.
func (s *Store) RecordBlobAccounts(ctx context.Context, tenant, id string, accounts []store.Account) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return store.ErrNotFound
	}
	enc, err := engine.EncodeAccounts(accounts)
	if err != nil {
		return fmt.Errorf("postgres: blob %s: %w", id, err)
	}
	tag, err := s.pool.Exec(ctx,
		`UPDATE blobs SET accounts = coalesce(accounts, $1) WHERE id = $2 AND tenant = $3 AND complete`,
		enc, uid, tenant)
	if err != nil {
		return fmt.Errorf("postgres: record the accounts of blob %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// blobReader holds at most two chunks in memory: the one being read and the
// next, which it fetches in the background meanwhile, so that the worker's
// parse does not stop for a round trip and the chunk's detoasting at every
// chunk. It holds a connection only while a fetch is in flight.
type blobReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	pool   *pgxpool.Pool
	id     uuid.UUID
	chunks int
	size   int64
	next   int // the chunk to hand out next
	read   int64
	cur    []byte
	// The current chunk's buffer and a spare that the next fetch fills.
	// Reusing the two spares the worker a fresh 1 MiB allocation per chunk,
	// which under its memory limit meant fresh pages and page faults for
	// every chunk of the report.
	buf, spare []byte
	pending    chan fetchedChunk // the fetch of chunk next, if started
	closed     bool
}

type fetchedChunk struct {
	data []byte
	err  error
}

// fetch starts reading chunk seq into the spare buffer.
func (b *blobReader) fetch(seq int) {
	b.pending = make(chan fetchedChunk, 1)
	go func(dst []byte, done chan<- fetchedChunk) {
		chunk := pgtype.PreallocBytes(dst[:cap(dst)])
		err := b.pool.QueryRow(b.ctx,
			`SELECT data FROM blob_chunks WHERE blob_id = $1 AND seq = $2`,
			b.id, seq).Scan(&chunk)
		switch {
		case isNoRows(err):
			err = fmt.Errorf("postgres: blob %s deleted while reading: %w", b.id, store.ErrNotFound)
		case err != nil:
			err = fmt.Errorf("postgres: read blob %s: %w", b.id, err)
		}
		done <- fetchedChunk{data: chunk, err: err}
	}(b.spare, b.pending)
	b.spare = nil
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("postgres: read of closed blob")
	}
	for len(b.cur) == 0 {
		if b.next == b.chunks {
			if b.read != b.size {
				return 0, fmt.Errorf("postgres: blob %s: read %d of %d bytes: %w", b.id, b.read, b.size, io.ErrUnexpectedEOF)
			}
			return 0, io.EOF
		}
		if b.pending == nil {
			b.fetch(b.next)
		}
		got := <-b.pending
		b.pending = nil
		if got.err != nil {
			return 0, got.err
		}
		// The chunk just read out becomes the spare for the next fetch.
		b.spare, b.buf, b.cur = b.buf, got.data, got.data
		b.next++
		if b.next < b.chunks {
			b.fetch(b.next)
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	b.read += int64(n)
	return n, nil
}

// Close stops a fetch in flight and waits for it, so that nothing uses the
// pool on the reader's behalf afterwards.
func (b *blobReader) Close() error {
	if b.closed {
		return nil
	}
	b.cancel()
	if b.pending != nil {
		<-b.pending
		b.pending = nil
	}
	b.closed, b.cur, b.buf, b.spare = true, nil, nil, nil
	return nil
}

// DeleteBlob implements store.Store.
func (s *Store) DeleteBlob(ctx context.Context, tenant, id string) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return store.ErrNotFound
	}
	// The rows and their TOAST data become dead tuples that autovacuum
	// makes reusable for later uploads; the files do not shrink.
	tag, err := s.pool.Exec(ctx, `DELETE FROM blobs WHERE id = $1 AND tenant = $2 AND complete`, uid, tenant)
	if err != nil {
		return fmt.Errorf("postgres: delete blob %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
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
	err = s.pool.QueryRow(ctx,
		`SELECT (SELECT count(*) FROM blobs WHERE tenant = $1),
		        (SELECT count(*) FROM blob_chunks c JOIN blobs b ON b.id = c.blob_id WHERE b.tenant = $1)`,
		tenant).Scan(&blobs, &chunks)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: count blobs: %w", err)
	}
	return blobs, chunks, nil
}

// SweepIncompleteBlobs implements store.Janitor.
func (s *Store) SweepIncompleteBlobs(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM blobs WHERE NOT complete AND touched_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("postgres: sweep incomplete blobs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (s *Store) purgeIncompleteBlobs(ctx context.Context) error {
	_, err := s.SweepIncompleteBlobs(ctx, time.Now().Add(-engine.IncompleteBlobTTL))
	return err
}
