-- The kept documents' text in search_history's index, as in search.sqlite (schema 3): one row per passage of a
-- document (kind 'document', n rising with each passage kept), `seq` its page (0: none), `role` its source
-- ('file' or 'web'), `speaker` who sent it, `place` its name and URL (shown with a hit; its words are the row's
-- `around`), `doc` the chat_documents id it was cut from (its rows go when the document does). Rows are written
-- in the transaction that keeps or drops the document (store/postgres/chat.py). A document kept before this
-- version is indexed when its chat's index is next rebuilt (store/postgres/indexing.py: `reindex`).
ALTER TABLE search_docs DROP CONSTRAINT search_docs_kind_check;
ALTER TABLE search_docs ADD CONSTRAINT search_docs_kind_check CHECK (kind IN ('message', 'history', 'document'));
ALTER TABLE search_docs ADD COLUMN place text;
ALTER TABLE search_docs ADD COLUMN doc text;
CREATE INDEX search_docs_doc ON search_docs (chat, doc) WHERE doc IS NOT NULL;
