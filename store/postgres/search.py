"""search_history in PostgreSQL: one chat's past ranked for a question, as memory/search.py ranks it in
search.sqlite (store/postgres/indexing.py writes the rows; schema/0003_search.sql).

    hits = await PgSearch(db).search(ChatKey("telegram", "42"), "What are Ana's plans for the summer?")

The same reading as the files backend (memory/question.py: terms, the members named, the dates), the same
respelling and hits (memory/search_core.py), and the same ranking: PostgreSQL has no bm25, so RANK
computes FTS5's in SQL. The rows holding any of the question's words are found through the GIN indexes;
in each, every word's occurrences in its own text and, weighted `Weights.around`, in its neighbours'
(`ts_filter(setweight(...))` keeps just the question's words of a tsvector); a word's document frequency
is the number of those rows holding it. Then idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length /
avgdl)), summed over the words, times the weights for a HISTORY.md entry and for a time the question
names; a member the question names re-ranks the best candidates, and ties keep FTS5's order, as in
search.sqlite. On bench/recall.py's conversations both backends return the same results in the same order.

One round trip reads the chat, its members and which of the question's words it used; misspelt words
cost one more; the ranking, excerpts (ts_headline) and neighbours come back in one query.
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo

import psycopg

from memory import question as questions
from memory.keys import ChatKey
from memory.search_core import (CANDIDATES, EXCERPT_TOKENS, FULL_TEXT_CHARS, MAX_TERMS, Hit, Weights, closest, hit,
                                line, respellable, stamp, trigrams)
from store.postgres.indexing import CONFIG
from store.postgres.pool import Database

K1, B = 1.2, 0.75  # FTS5's bm25 constants
HEADLINE = (f'MaxWords={EXCERPT_TOKENS}, MinWords={EXCERPT_TOKENS // 2}, ShortWord=0, MaxFragments=1, '
            'StartSel="", StopSel=""')

CHAT = """
SELECT c.id, c.pointer,
       ARRAY(SELECT name FROM search_members m WHERE m.chat = c.id ORDER BY name),
       ARRAY(SELECT word FROM search_words w WHERE w.chat = c.id AND w.word = ANY(%s::text[]))
FROM chats c WHERE c.channel = %s AND c.chat_id = %s"""

SHARING = """(
SELECT %s::text, word FROM search_words WHERE chat = %s AND ({})
ORDER BY similarity(word, %s) DESC, word LIMIT %s)"""  # {}: `word LIKE %s` OR-ed, one per trigram

RANK = f"""
WITH phrases AS (   -- the question's words, one row per word of each term (FTS5's phrases)
    SELECT t.i, l.lexeme
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, i)
    CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('{CONFIG}', t.term))) AS l(lexeme)
), question AS (    -- the words, and a tsquery matching any of them (each quoted as a tsquery lexeme)
    SELECT array_agg(DISTINCT lexeme) AS lexemes,
           string_agg(DISTINCT '''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | ')::tsquery
             AS q
    FROM phrases
), hits AS MATERIALIZED (   -- every row of the chat holding any of the words (found through the GIN
                            -- indexes), with each word's occurrences in it: in its own text counting 1,
                            -- in its neighbours' (`around`) counting Weights.around
    SELECT d.kind, d.n, d.seq, d.key, d.length,
           CASE d.kind WHEN 'history' THEN %(history)s WHEN 'document' THEN %(document)s ELSE 1.0 END
           * CASE WHEN coalesce(d.ts_end, d.ts) >= %(since)s AND d.ts < %(until)s THEN %(dated)s ELSE 1.0 END
             AS boost,
           o.lexeme, o.tf
    FROM search_docs d CROSS JOIN question
    CROSS JOIN LATERAL (
        SELECT lexeme, sum(tf) AS tf FROM (
            SELECT lexeme, array_length(positions, 1)::float8 AS tf
            FROM unnest(ts_filter(setweight(d.body_tsv, 'A', question.lexemes), '{{a}}'))
            UNION ALL
            SELECT lexeme, %(around)s * array_length(positions, 1)
            FROM unnest(ts_filter(setweight(d.around_tsv, 'A', question.lexemes), '{{a}}'))
        ) occurrences GROUP BY lexeme
    ) o
    WHERE d.chat = %(chat)s AND (d.body_tsv @@ question.q OR d.around_tsv @@ question.q)
), stats AS (
    SELECT docs, greatest(tokens::float8 / greatest(docs, 1), 1e-9) AS avgdl FROM search_stats WHERE chat = %(chat)s
), idf AS (         -- in how many of the chat's rows each word is (any column), as bm25's idf
    SELECT h.lexeme, greatest(ln((s.docs - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf
    FROM hits h CROSS JOIN stats s GROUP BY h.lexeme, s.docs
), scored AS (      -- bm25 of the entries, documents and messages already consolidated, times the weights
    SELECT h.kind, h.n, h.key,
           h.boost * sum(i.idf * h.tf * {K1 + 1} / (h.tf + {K1} * ({1 - B} + {B} * h.length / s.avgdl))) AS score
    FROM hits h JOIN phrases p ON p.lexeme = h.lexeme JOIN idf i ON i.lexeme = h.lexeme CROSS JOIN stats s
    WHERE h.kind <> 'message' OR h.seq < %(pointer)s
    GROUP BY h.kind, h.n, h.key, h.boost
), pool AS (        -- equal scores (rounded: sums in another order differ in the last bits) go in FTS5's
    SELECT *, CASE kind WHEN 'document' THEN 0 WHEN 'history' THEN 1 ELSE 2 END AS tier  -- order: documents,
    FROM scored ORDER BY round(score::numeric, 9) DESC, tier, n LIMIT %(pool)s  -- entries, messages in order
), best AS (        -- a member the question names: their messages re-ranked among the best candidates
    SELECT kind, n, row_number() OVER (  -- (a tie keeps the candidates' order)
        ORDER BY round((score * CASE WHEN key = ANY(%(names)s::text[]) THEN %(named)s ELSE 1.0 END)::numeric, 9)
                 DESC, round(score::numeric, 9) DESC, tier, n) AS place
    FROM pool
)
SELECT d.kind, d.role, d.seq, d.ts, d.ts_end, d.speaker,
       CASE WHEN length(d.body) > %(long)s THEN ts_headline('{CONFIG}', d.body, question.q, %(headline)s) END,
       d.body, b.role, b.speaker, b.body, a.role, a.speaker, a.body, d.place
FROM best JOIN search_docs d ON d.chat = %(chat)s AND d.kind = best.kind AND d.n = best.n
CROSS JOIN question
LEFT JOIN search_docs b ON d.kind = 'message' AND b.chat = d.chat AND b.kind = 'message' AND b.n = d.n - 1
LEFT JOIN search_docs a ON d.kind = 'message' AND a.chat = d.chat AND a.kind = 'message' AND a.n = d.n + 1
WHERE best.place <= %(limit)s
ORDER BY best.place"""


def excerpt(body: str, fragment: str) -> str:
    """The fragment ts_headline chose, marked with … where it cuts the text (as FTS5's snippet marks it)."""
    fragment = fragment.strip()
    text = body.strip()
    head = "" if text.startswith(fragment[:40]) else "… "
    tail = "" if text.endswith(fragment[-40:]) else " …"
    return f"{head}{fragment}{tail}"


class PgSearch:
    """search_history over the chats of one database."""

    def __init__(self, db: Database, weights: Weights = Weights()) -> None:
        self.db = db
        self.weights = weights

    async def search(self, key: ChatKey, query: str, limit: int = 5, zone: tzinfo = timezone.utc,
                     now: datetime | None = None) -> list[Hit]:
        """The `limit` best matches for the question `query` in this chat, best first.

        Dates in the question are read in `zone`, relative ones from `now` (default: the present)."""
        asked = [w for w in dict.fromkeys(questions.words(query)) if respellable(w)][:MAX_TERMS * 4]
        async with self.db.connection() as conn:
            row = await (await conn.execute(CHAT, (asked, key.channel, key.chat_id), prepare=True)).fetchone()
            if row is None:
                return []
            chat_id, pointer, members, known = row
            q = questions.read(query, members, now or datetime.now(zone))
            terms = await self._respell(conn, chat_id, q.terms[:MAX_TERMS], set(known))
            if not terms:
                return []
            w = self.weights
            rows = await (await conn.execute(RANK, {
                "chat": chat_id, "pointer": pointer, "terms": list(terms), "names": list(q.names),
                "since": q.since, "until": q.until, "around": w.around, "history": w.history, "dated": w.dated,
                "named": w.named, "document": w.document, "pool": max(50, limit * 5) if q.names else limit,
                "limit": limit,
                "long": FULL_TEXT_CHARS, "headline": HEADLINE}, prepare=True)).fetchall()
        return [_hit(row) for row in rows]

    async def drop(self, key: ChatKey) -> None:
        """Nothing to drop: a chat's search rows are rewritten with the chat in the same transaction."""

    def holds(self, key: ChatKey) -> bool:
        """No copy apart from the chat's rows (they go with it)."""
        return False

    async def _respell(self, conn: psycopg.AsyncConnection, chat_id: int, terms: tuple[str, ...],
                       known: set[str]) -> tuple[str, ...]:
        """memory/search_core.py's `respell`: the candidates for every word the chat never used asked in
        one query (the words sharing a trigram with it, the most similar first)."""
        unknown = [t for t in dict.fromkeys(terms) if respellable(t) and t not in known]
        if not unknown:
            return terms
        parts, params = [], []
        for term in unknown:
            grams = [f"%{_like(g)}%" for g in trigrams(term)]
            parts.append(SHARING.format(" OR ".join(["word LIKE %s"] * len(grams))))
            params += [term, chat_id, *grams, term, CANDIDATES]
        candidates: dict[str, list[str]] = {t: [] for t in unknown}
        for term, word in await (await conn.execute(" UNION ALL ".join(parts), params)).fetchall():
            candidates[term].append(word)
        return tuple(closest(t, candidates[t]) if t in candidates else t for t in terms)


def _hit(row: tuple) -> Hit:
    kind, role, seq, ts, ts_end, speaker, fragment, body = row[:8]
    if kind == "document":  # a passage: its document's name (and URL), page and sender, as memory/search.py's
        return Hit("document", stamp(ts), excerpt(body, fragment) if fragment else body, speaker, document=row[14],
                   page=seq, web=role == "web")
    return hit(kind, role, seq, ts, ts_end, speaker, excerpt(body, fragment) if fragment else body,
               line(*row[8:11]), line(*row[11:14]))


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
