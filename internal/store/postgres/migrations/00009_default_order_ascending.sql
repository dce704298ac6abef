-- Ties in every findings order are broken by uid, then id, in the
-- direction of the first sort key, so that each documented sort, either
-- way, is one read of an index: forwards, or backwards for the other
-- direction. The severity index therefore runs one way throughout; read
-- backwards it gives the default order (-severity_id, then uid and id
-- descending).

-- +goose Up
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id, uid);

-- +goose Down
DROP INDEX findings_default_order;
CREATE INDEX findings_default_order ON findings (tenant, severity_id DESC, uid);
