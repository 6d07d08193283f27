-- search_history's index (store/postgres/indexing.py writes it, store/postgres/search.py reads it): the
-- PostgreSQL twin of a chat's search.sqlite. Its rows are written in the same transactions as the messages
-- and HISTORY.md entries they copy, so the index is always exactly the chat's content; every row hangs off
-- the chat's `chats` row (ON DELETE CASCADE), so /forget deletes it with the rest.
--
-- unaccent (accents folded) and pg_trgm (respelling) and btree_gin (one GIN index over a chat and its words)
-- are contrib modules marked trusted since PostgreSQL 13: the database's owner creates them, no superuser.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS unaccent;
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE EXTENSION IF NOT EXISTS btree_gin;
EXCEPTION WHEN OTHERS THEN
    RAISE EXCEPTION 'Tusk''s search needs the PostgreSQL extensions unaccent, pg_trgm and btree_gin: %', SQLERRM
        USING HINT = 'they come with PostgreSQL''s contrib modules (Debian and Ubuntu: part of the postgresql '
                     'package; elsewhere postgresql-contrib) and are trusted, so the database''s owner may '
                     'create them (PostgreSQL 13 or newer)';
END
$$;

-- Words as FTS5's `porter unicode61 remove_diacritics 2` makes them: accents folded, stemmed by the original
-- Porter algorithm (snowball's `porter`, as FTS5's; its `english` is Porter2, which keeps "news" and makes
-- "dying" "die"), and no stop words dropped (a question of nothing but stop words still finds its words).
-- Text is cut into words at every character that is not a letter or a digit before it gets here
-- (indexing.py: `searchable`).
CREATE TEXT SEARCH DICTIONARY tusk_porter (TEMPLATE = snowball, Language = porter);
CREATE TEXT SEARCH CONFIGURATION tusk_search (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION tusk_search
    ALTER MAPPING FOR asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part,
                      hword_numpart
    WITH unaccent, tusk_porter;

-- One row per HISTORY.md entry (kind 'history', n its entry number) and per user or assistant message with
-- text (kind 'message', n its place among them: 1, 2, ...; its neighbours are n - 1 and n + 1).
CREATE TABLE search_docs (
    chat        bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('message', 'history')),
    n           integer NOT NULL,
    seq         integer NOT NULL,                  -- a message's number in the session; -1 for an entry
    ts          double precision NOT NULL,         -- when it was said; an entry's first time
    ts_end      double precision,                  -- an entry's last time (its span)
    role        text,                              -- 'user' or 'assistant' (messages)
    speaker     text,                              -- who wrote a user message (display name)
    key         text,                              -- the speaker's name lowercased, as questions name members
    body        text NOT NULL,                     -- the text shown (a copy of the message or the entry)
    body_tsv    tsvector NOT NULL,                 -- its words
    around_tsv  tsvector NOT NULL,                 -- the words of the messages just before and after it
    length      integer NOT NULL,                  -- words in body and around: bm25's document length
    PRIMARY KEY (chat, kind, n)
);
CREATE INDEX search_docs_body ON search_docs USING gin (chat, body_tsv);
CREATE INDEX search_docs_around ON search_docs USING gin (chat, around_tsv);

-- Per chat: its rows and their words, for bm25's document count and average length.
CREATE TABLE search_stats (
    chat    bigint PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
    docs    bigint NOT NULL,
    tokens  bigint NOT NULL
);

-- Every word the chat used (4+ letters, as written, lowercased): respelling offers the closest one.
CREATE TABLE search_words (
    chat  bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    word  text NOT NULL,
    PRIMARY KEY (chat, word)
);
CREATE INDEX search_words_grams ON search_words USING gin (chat, word gin_trgm_ops);

-- Everyone who wrote in the chat (display names): a question naming one of them boosts their messages.
CREATE TABLE search_members (
    chat  bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    name  text NOT NULL,
    PRIMARY KEY (chat, name)
);
