-- What each chat keeps. Every row of a chat hangs off its `chats` row (ON DELETE CASCADE): a chat's rows
-- are reached only through its key, and /forget deletes that one row and with it everything of the chat.

CREATE TABLE chats (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel        text NOT NULL,
    chat_id        text NOT NULL,
    created        double precision NOT NULL,          -- unix seconds (session.jsonl's meta record)
    pointer        integer NOT NULL DEFAULT 0,         -- messages [0, pointer) are consolidated
    total          integer NOT NULL DEFAULT 0,         -- messages stored: the next one's seq
    lines          integer NOT NULL DEFAULT 0,         -- session lines stored: the next one's n
    memory         text NOT NULL DEFAULT '',           -- MEMORY.md
    memory_version integer NOT NULL DEFAULT 0,         -- bumped by every write of MEMORY.md (compare-and-set)
    version        bigint NOT NULL DEFAULT 0,          -- bumped by every write to the chat (caches check it)
    epoch          bigint NOT NULL DEFAULT 0,          -- bumped when a worker takes the chat (fencing)
    active         double precision,                   -- the last write, for `tusk chats` and the sweep
    UNIQUE (channel, chat_id)
);

-- session.jsonl, a row per line, each exactly as the file holds it (store/files writes the same lines:
-- memory/session.py builds them): the meta line, the messages (`seq` their number), the pointer lines, and
-- lines a restore brought that Tusk skips (a torn or hand-broken line; `seq` NULL). `source` is a message's
-- `tusk import` mark (its id in the export it came from), so a resumed import finds what it wrote.
CREATE TABLE session_lines (
    chat    bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    n       integer NOT NULL,
    seq     integer,
    source  text,
    line    text NOT NULL,
    PRIMARY KEY (chat, n)
);
CREATE UNIQUE INDEX session_lines_seq ON session_lines (chat, seq) WHERE seq IS NOT NULL;
CREATE INDEX session_lines_source ON session_lines (chat, source) WHERE source IS NOT NULL;

-- versions/: the previous MEMORY.md texts (the last 10), under their file names (MEMORY.<utc stamp>.md).
CREATE TABLE memory_versions (
    chat   bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    n      bigint GENERATED ALWAYS AS IDENTITY,
    name   text NOT NULL,
    saved  double precision NOT NULL,
    text   text NOT NULL,
    PRIMARY KEY (chat, n)
);

-- HISTORY.md: its dated entries, in order; `block` is the entry as the file holds it (its heading, text and
-- the blank lines after), so the rows in order are the file. Row 0, when present, is text a restored file had
-- before its first entry (no entry: never shown, never searched).
CREATE TABLE history (
    chat  bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    n     integer NOT NULL,
    at    double precision NOT NULL,                 -- the first message it summarises
    until double precision,                          -- the last, when they span more than a minute
    text  text NOT NULL,                             -- the entry's text (no heading)
    block text NOT NULL,
    PRIMARY KEY (chat, n)
);

-- settings.json, PERSONA.md, provenance.json, forgotten.json: small texts read and written whole.
CREATE TABLE chat_docs (
    chat  bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    name  text NOT NULL,
    body  text NOT NULL,
    PRIMARY KEY (chat, name)
);

-- media/: files that came with messages, their bytes in chunks (streamed in and out, never whole in memory).
CREATE TABLE media (
    chat     bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    path     text NOT NULL,                            -- "media/<name>", as session records name it
    size     bigint NOT NULL,
    created  double precision NOT NULL,
    complete boolean NOT NULL DEFAULT false,           -- false while its chunks are being written
    PRIMARY KEY (chat, path)
);

CREATE TABLE media_chunks (
    chat  bigint NOT NULL,
    path  text NOT NULL,
    n     integer NOT NULL,
    data  bytea NOT NULL,
    PRIMARY KEY (chat, path, n),
    FOREIGN KEY (chat, path) REFERENCES media (chat, path) ON DELETE CASCADE
);

-- documents/: the text read from documents and web pages, kept for search_history (memory/documents.py's
-- JSON record, under its id).
CREATE TABLE chat_documents (
    chat  bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    id    text NOT NULL,
    body  text NOT NULL,
    PRIMARY KEY (chat, id)
);
