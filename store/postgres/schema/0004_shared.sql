-- What is shared by every chat. Small documents read and written whole (store/shared.py): pairing.json,
-- api-keys.json, models.json, budgets.json, backup-status.json, each one row.
CREATE TABLE shared_docs (
    name     text PRIMARY KEY,
    body     text,
    version  bigint NOT NULL DEFAULT 0
);
