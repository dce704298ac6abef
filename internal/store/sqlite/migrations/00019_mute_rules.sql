-- Mute rules (docs/decisions/0024-mute-rules.md): the rules the MuteRule
-- controller stores, each with where its pass over the stored findings
-- stands, and a mark per finding and rule that matches it. A rule's marks
-- go with it (ON DELETE CASCADE).

-- +goose Up
CREATE TABLE mute_rules (
    tenant      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    expires_at  INTEGER,
    match       TEXT    NOT NULL,
    cursor_scan TEXT    NOT NULL DEFAULT '',
    cursor_uid  TEXT    NOT NULL DEFAULT '',
    scanned     INTEGER NOT NULL DEFAULT 0,
    done        BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE finding_mutes (
    tenant TEXT NOT NULL,
    id     TEXT NOT NULL,
    rule   TEXT NOT NULL,
    PRIMARY KEY (tenant, id, rule),
    FOREIGN KEY (tenant, rule) REFERENCES mute_rules (tenant, name) ON DELETE CASCADE
);
CREATE INDEX finding_mutes_rule ON finding_mutes (tenant, rule);

-- +goose Down
DROP TABLE finding_mutes;
DROP TABLE mute_rules;
