-- +goose Up
-- The accounts a report names, found while it was uploaded, so billing
-- need not read the report again. NULL marks a blob stored before they were
-- recorded (or by PutBlob): billing then reads the report once to find them.
ALTER TABLE blobs ADD COLUMN accounts TEXT;

-- +goose Down
ALTER TABLE blobs DROP COLUMN accounts;
