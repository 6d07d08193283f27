"""search_history's index in PostgreSQL, written (schema/0003_search.sql; store/postgres/search.py reads it).

The chat store calls these inside the transaction that writes what they index, so the index is always
exactly the chat's content and needs no state of its own to catch up from:

    await index_messages(conn, chat_id, start, messages)   # append: messages stored from seq `start` on
    await index_entries(conn, chat_id)                      # commit_round, append_history: the new entries
    await index_document(conn, chat_id, doc_id, record)     # keep_document: its passages (again)
    await unindex_documents(conn, chat_id, doc_ids)         # drop_documents: their passages gone
    await reindex(conn, chat_id)                            # replace_session, replace_history: all again

Rows are as in search.sqlite (memory/search_index.py): each user or assistant message with text, with the
words of the message before and after it (`around`: a new message also updates its predecessor's), and
each HISTORY.md entry dated with its span, each passage of a kept document (memory/search_index.py's
`passages`: its page, sender and date, its name and URL as its `around`); the chat's words (for respelling),
its members, and the two numbers bm25 needs (rows and words).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence

import psycopg

from memory import documents
from memory.question import words
from memory.search_core import vocabulary
from memory.search_index import passages
from memory.session import Message

CONFIG = "tusk_search"  # the text search configuration (schema/0003_search.sql)
AROUND_CHARS = 400  # each neighbour contributes at most this much text to `around` (as in search.sqlite)
INDEX_CHARS = 200_000  # a longer text's words are indexed up to here (a tsvector holds at most 1 MB)
NOT_WORD = re.compile(r"[\W_]+")

INSERT = (f"INSERT INTO search_docs (chat, kind, n, seq, ts, ts_end, role, speaker, key, body, body_tsv,"
          f" around_tsv, length, place, doc) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
          f" to_tsvector('{CONFIG}', %s), to_tsvector('{CONFIG}', %s), %s, %s, %s)")


def searchable(text: str) -> str:
    """The words of `text` separated by single spaces: cut at every character that is neither a letter
    nor a digit, as FTS5's unicode61 tokenizer cuts (so "ana@example.com" is three words, "don't" two),
    whatever the database's locale."""
    return NOT_WORD.sub(" ", unicodedata.normalize("NFC", text[:INDEX_CHARS])).strip()


def indexed(message: Message) -> bool:
    """Whether a message is searched: a user or assistant message with text (not a tool step)."""
    return message.role in ("user", "assistant") and bool(message.content and message.content.strip())


def _around(before: str | None, after: str | None) -> str:
    return " ".join(t[:AROUND_CHARS] for t in (before, after) if t)


class _Rows:
    """The rows one call inserts, and what they add to the chat's totals."""

    def __init__(self, chat_id: int) -> None:
        self.chat_id = chat_id
        self.rows: list[tuple] = []
        self.docs = self.tokens = 0
        self.texts: list[str] = []
        self.members: set[str] = set()

    def add(self, kind: str, n: int, seq: int, ts: float, ts_end: float | None, role: str | None,
            speaker: str | None, body: str, around: str, place: str | None = None, doc: str | None = None) -> None:
        """A row; `place` and `doc` a document passage's name and URL and its document's id (its sender is not
        a member of the chat's: members are those who wrote messages)."""
        body = body.replace("\x00", "")
        words_body, words_around = searchable(body), searchable(around)
        length = len(words_body.split()) + len(words_around.split())
        key = " ".join(words(speaker)) if speaker else None
        self.rows.append((self.chat_id, kind, n, seq, ts, ts_end, role, speaker, key, body, words_body,
                          words_around, length, place, doc))
        self.docs, self.tokens = self.docs + 1, self.tokens + length
        self.texts.append(body)
        if speaker and doc is None:
            self.members.add(speaker)

    async def write(self, conn: psycopg.AsyncConnection) -> None:
        if self.rows:
            async with conn.cursor() as cur:
                await cur.executemany(INSERT, self.rows)
        await _add_totals(conn, self.chat_id, self.docs, self.tokens)
        await _add_words(conn, self.chat_id, self.texts, self.members)


async def _add_totals(conn: psycopg.AsyncConnection, chat_id: int, docs: int, tokens: int) -> None:
    if docs or tokens:
        await conn.execute("INSERT INTO search_stats (chat, docs, tokens) VALUES (%s, %s, %s)"
                           " ON CONFLICT (chat) DO UPDATE SET docs = search_stats.docs + EXCLUDED.docs,"
                           " tokens = search_stats.tokens + EXCLUDED.tokens", (chat_id, docs, tokens))


async def _add_words(conn: psycopg.AsyncConnection, chat_id: int, texts: Iterable[str], members: set[str]) -> None:
    new = sorted(vocabulary(texts))
    if new:
        await conn.execute("INSERT INTO search_words (chat, word) SELECT %s, w FROM unnest(%s::text[]) w"
                           " ON CONFLICT DO NOTHING", (chat_id, new))
    if members:
        await conn.execute("INSERT INTO search_members (chat, name) SELECT %s, m FROM unnest(%s::text[]) m"
                           " ON CONFLICT DO NOTHING", (chat_id, sorted(members)))


async def index_messages(conn: psycopg.AsyncConnection, chat_id: int, start: int,
                         messages: Sequence[Message]) -> None:
    """Index `messages`, stored as the chat's messages `start`, `start + 1`, ...: a row for each user or
    assistant message with text, and the newest message indexed before them gets them as its next neighbour."""
    await _index_numbered(conn, chat_id, [(start + i, m) for i, m in enumerate(messages)])


async def _index_numbered(conn: psycopg.AsyncConnection, chat_id: int, numbered: Iterable[tuple[int, Message]]) -> None:
    new = [(seq, m) for seq, m in numbered if indexed(m)]
    if not new:
        return
    prev = (await (await conn.execute(
        "SELECT n, body, length, around_tsv FROM search_docs WHERE chat = %s AND kind = 'message'"
        " ORDER BY n DESC LIMIT 2", (chat_id,))).fetchall())[::-1]
    texts = [r[1] for r in prev] + [m.content for _, m in new]
    first = len(prev)  # where the new messages start in `texts`
    rows = _Rows(chat_id)
    if prev:  # the newest message so far now has a next neighbour: its `around` gains it
        n, body, old_length = prev[-1][:3]
        around = searchable(_around(texts[first - 2] if first == 2 else None, texts[first]))
        length = len(searchable(body).split()) + len(around.split())
        await conn.execute(f"UPDATE search_docs SET around_tsv = to_tsvector('{CONFIG}', %s), length = %s"
                           " WHERE chat = %s AND kind = 'message' AND n = %s", (around, length, chat_id, n))
        rows.tokens += length - old_length
    last = prev[-1][0] if prev else 0
    for i, (seq, message) in enumerate(new, first):
        around = _around(texts[i - 1] if i > 0 else None, texts[i + 1] if i + 1 < len(texts) else None)
        speaker = message.sender_name if message.role == "user" else None
        rows.add("message", last + 1 + i - first, seq, message.ts, None, message.role, speaker, message.content or "",
                 around)
    await rows.write(conn)


async def index_entries(conn: psycopg.AsyncConnection, chat_id: int) -> None:
    """Index the chat's HISTORY.md entries added since the last call (those numbered past the newest indexed)."""
    entries = await (await conn.execute(
        "SELECT n, at, until, text FROM history WHERE chat = %s AND n > (SELECT coalesce(max(n), 0)"
        " FROM search_docs WHERE chat = %s AND kind = 'history') ORDER BY n", (chat_id, chat_id))).fetchall()
    rows = _Rows(chat_id)
    for n, at, until, text in entries:
        rows.add("history", n, -1, at, until, None, None, text.strip(), "")
    await rows.write(conn)


async def index_document(conn: psycopg.AsyncConnection, chat_id: int, doc_id: str, record: str) -> None:
    """Index a kept document (memory/documents.py's record under `doc_id`) in passages, replacing its earlier
    rows (the same document sent again); a record that is not a kept document is not indexed."""
    await unindex_documents(conn, chat_id, [doc_id])
    doc = documents.parse(doc_id, record)
    if doc is None:
        return
    speaker = doc.sender_name or doc.sender_id or None  # the id where the platform gave no name (the HTTP API)
    where = " ".join(filter(None, (doc.name, doc.url)))
    row = await (await conn.execute("SELECT coalesce(max(n), 0) FROM search_docs WHERE chat = %s AND"
                                    " kind = 'document'", (chat_id,))).fetchone()
    last = row[0] if row is not None else 0
    rows = _Rows(chat_id)
    for n, (page, passage) in enumerate(passages(doc.text), last + 1):
        rows.add("document", n, page, doc.ts, None, doc.source, speaker, passage, where, where, doc_id)
    await rows.write(conn)


async def unindex_documents(conn: psycopg.AsyncConnection, chat_id: int, doc_ids: Sequence[str]) -> None:
    """The passages of these kept documents out of the index (and out of bm25's totals)."""
    gone = await (await conn.execute("DELETE FROM search_docs WHERE chat = %s AND kind = 'document' AND doc = ANY(%s)"
                                     " RETURNING length", (chat_id, list(doc_ids)))).fetchall()
    if gone:
        await _add_totals(conn, chat_id, -len(gone), -sum(length for (length,) in gone))


async def reindex(conn: psycopg.AsyncConnection, chat_id: int) -> None:
    """The chat's index made again from its messages, HISTORY.md entries and kept documents (after the session
    or HISTORY.md was replaced)."""
    for table in ("search_docs", "search_stats", "search_words", "search_members"):
        await conn.execute(f"DELETE FROM {table} WHERE chat = %s", (chat_id,))
    numbered = []
    async with conn.cursor() as cur:
        await cur.execute("SELECT seq, line FROM session_lines WHERE chat = %s AND seq IS NOT NULL ORDER BY seq",
                          (chat_id,))
        async for seq, line in cur:
            numbered.append((seq, Message.from_record(json.loads(line))))
    await _index_numbered(conn, chat_id, numbered)
    await index_entries(conn, chat_id)
    kept = await (await conn.execute("SELECT id, body FROM chat_documents WHERE chat = %s", (chat_id,))).fetchall()
    for doc_id, record in sorted(kept, key=lambda row: (_kept_ts(row[1]), row[0])):  # n follows time, as on files
        await index_document(conn, chat_id, doc_id, record)


def _kept_ts(record: str) -> float:
    try:
        return float(json.loads(record).get("ts") or 0)
    except (ValueError, TypeError, AttributeError):
        return 0.0
