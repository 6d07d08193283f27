-- The inbox journal (bot/inbox_pg.py): a platform message, or a due reminder's run, is a row from before the
-- platform is acknowledged until its turn ends; the row is deleted then (answered or failed), so no text
-- lingers. `run` is the process that holds the turn: while it lives it holds the session advisory lock
-- (INBOX_LOCK, run); a row whose run's lock is free is a crash's leftover, taken by the next Tusk that serves
-- its channel. `seq` is the message's id in that process. `record` is inbox.jsonl's line (json, not jsonb:
-- kept exactly as the platform gave it, NUL characters included).
CREATE TABLE inbox (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,   -- the order messages came in
    run        integer NOT NULL,
    seq        bigint NOT NULL,
    channel    text NOT NULL,
    chat_id    text NOT NULL,
    sender_id  text NOT NULL,
    record     json NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run, seq)
);
CREATE INDEX inbox_chat ON inbox (channel, chat_id, sender_id);

-- Never twice (store/postgres/seen.py): the platform message ids already taken, ids only, never text. The
-- primary key answers "taken before?" atomically across processes; `at` (the database's clock) and `n` (the
-- order of insertion) let pruning delete ranges of an index.
CREATE TABLE seen (
    platform  text NOT NULL,
    id        text NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    n         bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (platform, id)
);
CREATE INDEX seen_at ON seen (at);
CREATE UNIQUE INDEX seen_n ON seen (n);
