-- A sign-out ends a session (the tokens descending from one password
-- sign-in) before its tokens expire. Every replica refuses the tokens of a
-- session named here. A row is kept until no token of its session could be
-- used anyway (ends_at), then pruned. A tenant's deletion leaves its
-- rows: a Tenant created again under the same name must not make the old
-- tokens good again.

-- +goose Up
CREATE TABLE ended_sessions (
    id      text        PRIMARY KEY,
    ends_at timestamptz NOT NULL
);
CREATE INDEX ended_sessions_ends_at ON ended_sessions (ends_at);

-- +goose Down
DROP TABLE ended_sessions;
