-- Mute rules (docs/decisions/0024-mute-rules.md): the rules the MuteRule
-- controller stores, each with where its pass over the stored findings
-- stands, and a mark per finding and rule that matches it. A rule's marks
-- go with it (ON DELETE CASCADE).

-- +goose Up
CREATE TABLE mute_rules (
    tenant      text        COLLATE "C" NOT NULL,
    name        text        COLLATE "C" NOT NULL,
    generation  bigint      NOT NULL,
    reason      text        NOT NULL,
    expires_at  timestamptz,
    match       text        NOT NULL,
    cursor_scan text        COLLATE "C" NOT NULL DEFAULT '',
    cursor_uid  text        COLLATE "C" NOT NULL DEFAULT '',
    scanned     bigint      NOT NULL DEFAULT 0,
    done        boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE finding_mutes (
    tenant text COLLATE "C" NOT NULL,
    id     uuid NOT NULL,
    rule   text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, id, rule),
    FOREIGN KEY (tenant, rule) REFERENCES mute_rules (tenant, name) ON DELETE CASCADE
);
CREATE INDEX finding_mutes_rule ON finding_mutes (tenant, rule);

-- +goose Down
DROP TABLE finding_mutes;
DROP TABLE mute_rules;
