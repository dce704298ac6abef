-- Deleted blobs and findings leave free pages that SQLite keeps inside the
-- file unless auto_vacuum is on. INCREMENTAL lets the store hand them back to
-- the file system after its deletions (PRAGMA incremental_vacuum) without a
-- full VACUUM each time. Switching an existing database from NONE needs one
-- VACUUM, which rewrites the whole file once: it needs as much free disk as
-- the database's size and holds the write lock meanwhile (seconds per GB).
-- VACUUM cannot run inside a transaction.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA auto_vacuum = INCREMENTAL;
VACUUM;

-- +goose Down
PRAGMA auto_vacuum = NONE;
VACUUM;
