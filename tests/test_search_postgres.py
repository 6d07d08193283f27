"""search_history in PostgreSQL on a real server: the index kept by the store's own transactions, the same
question reading and ranking as search.sqlite, accents, respelling, privacy between chats, hostile input."""

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from memory.keys import ChatKey
from memory.search import HistorySearch
from memory.session import Message, SessionStore
from store.base import Entry, RoundCommit
from store.postgres import migrations
from store.postgres.chats import PgChats
from store.postgres.rows import append_history
from store.postgres.pool import Database
from store.postgres.search import PgSearch

NOW = datetime(2023, 9, 1, 12, tzinfo=timezone.utc)
KEY = ChatKey("http", "c")
SEARCH_TABLES = ("search_docs", "search_words", "search_members", "search_stats")


def ts(*date):
    return datetime(*date, tzinfo=timezone.utc).timestamp()


def messages(lines):
    """[(sender or None for the bot, text, ts)] as stored messages."""
    return [Message("assistant", text, ts=at) if who is None else
            Message("user", text, ts=at, sender_id=who.lower(), sender_name=who) for who, text, at in lines]


@pytest.fixture
async def db(pg_url):
    database = Database(pg_url)
    await database.open()
    await migrations.require_current(database)
    yield database
    await database.close()


async def chat(db, lines, key=KEY, pending=0):
    """A chat whose session holds `lines`, all but the last `pending` consolidated; its store."""
    chats = PgChats(db)
    opened = await chats.open(key)
    await chats.append(opened, messages(lines))
    await chats.set_pointer(opened, len(lines) - pending)
    return chats, opened


async def rows(db, key=KEY):
    """How many rows each search table holds for the chat `key`."""
    async with db.connection() as conn:
        return {table: (await (await conn.execute(
            f"SELECT count(*) FROM {table} t JOIN chats c ON c.id = t.chat WHERE c.channel = %s AND c.chat_id = %s",
            (key.channel, key.chat_id))).fetchone())[0] for table in SEARCH_TABLES}


SUMMER = [("Bob", "Ana, what are your plans for the summer?", ts(2023, 5, 2)),
          ("Ana", "Hiking the Inca trail in Peru with my sister!", ts(2023, 5, 2, 0, 1)),
          ("Bob", "Wow, bring me a souvenir", ts(2023, 5, 2, 0, 2)),
          ("Bob", "My summer plans: nothing much, work.", ts(2023, 7, 1)),
          (None, "Sounds restful.", ts(2023, 7, 1, 0, 1))]


async def test_the_search_extensions_need_no_superuser(db):
    """The migration created unaccent, pg_trgm and btree_gin as the database's unprivileged owner."""
    async with db.connection() as conn:
        superuser = (await (await conn.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).fetchone())[0]
        names = {r[0] for r in await (await conn.execute("SELECT extname FROM pg_extension")).fetchall()}
    assert superuser is False and {"unaccent", "pg_trgm", "btree_gin"} <= names


async def test_the_answer_in_a_reply_is_found_with_its_question_and_speaker(db):
    """The reply that never repeats the question's words is found through its neighbour, named, in context."""
    await chat(db, SUMMER)
    hits = await PgSearch(db).search(KEY, "What are Ana's plans for the summer?", now=NOW)
    top = hits[0]
    assert (top.source, top.speaker, top.seq) == ("user", "Ana", 1)
    assert top.text == "Hiking the Inca trail in Peru with my sister!"
    assert top.at == "2023-05-02 00:01 UTC"
    assert top.before.speaker == "Bob" and "summer" in top.before.text and top.after.text == "Wow, bring me a souvenir"


async def test_postgres_ranks_as_search_sqlite_does(db, tmp_path):
    """The same chat on files (FTS5) and in PostgreSQL gives the same hits, in the same order."""
    lines = [*SUMMER, ("Ana", "I want to go back into education next year", ts(2023, 8, 1)),
             ("Bob", "Education is expensive, the summer job helps", ts(2023, 8, 1, 0, 1)),
             ("Ana", "we had dinner at the harbour", ts(2023, 4, 30, 20))]
    store = SessionStore(tmp_path / "home")
    session = store.get("http", "c")
    store.append(session, messages(lines))
    store.set_pointer(session, len(lines))
    await chat(db, lines)
    files, pg = HistorySearch(), PgSearch(db)
    for question in ("What are Ana's plans for the summer?", "what did Ana say about educaton?",
                     "dinner in April 2023", "Bob's job", "summer"):
        expected = files.search(session.files, question, limit=10, now=NOW)
        assert await pg.search(KEY, question, limit=10, now=NOW) == expected, question


async def test_a_misspelt_word_finds_the_word_the_chat_used(db):
    """"educaton" matches nothing, so the closest word the chat used ("education") is searched instead."""
    await chat(db, [("Ana", "I want to go back into education next year", ts(2023, 3, 1)),
                    ("Bob", "The weather is nice", ts(2023, 3, 2))])
    hits = await PgSearch(db).search(KEY, "what did Ana say about educaton?", now=NOW)
    assert [h.text for h in hits][:1] == ["I want to go back into education next year"]


async def test_a_member_named_in_the_question_ranks_their_own_message_first(db):
    """Of two equal messages, the one by the member the question names comes first, whoever wrote last."""
    await chat(db, [("Ana", "the blue bicycle is mine", ts(2023, 3, 1)),
                    ("Bob", "the blue bicycle is mine", ts(2023, 3, 2))])
    search = PgSearch(db)
    assert [h.speaker for h in await search.search(KEY, "whose is the blue bicycle, Bob?", now=NOW)] == ["Bob", "Ana"]
    assert [h.speaker for h in await search.search(KEY, "Ana and the blue bicycle", now=NOW)] == ["Ana", "Bob"]


async def test_dates_in_the_question_favour_what_was_said_then(db):
    """Of two equal messages, the one within "May 2023" in the chat's zone ranks first."""
    await chat(db, [("Ana", "we had dinner at the harbour", ts(2023, 4, 30, 20)),  # 1 May in Tokyo
                    ("Ana", "we had dinner at the harbour", ts(2023, 6, 10))])
    search = PgSearch(db)
    tokyo = await search.search(KEY, "dinner in May 2023", zone=ZoneInfo("Asia/Tokyo"), now=NOW)
    utc = await search.search(KEY, "dinner in June 2023", now=NOW)
    assert tokyo[0].seq == 0 and utc[0].seq == 1


async def test_only_consolidated_messages_are_searched(db):
    """Messages past the pointer (still in the prompt) are not found until a round consolidates them."""
    chats, opened = await chat(db, [("Ana", "the gate code is 1357", ts(2023, 1, 1)),
                                    ("Bob", "and the garage code is 2468", ts(2023, 1, 2))], pending=1)
    search = PgSearch(db)
    assert [h.text for h in await search.search(KEY, "garage code", now=NOW)] == ["the gate code is 1357"]
    await chats.commit_round(opened, RoundCommit(1, 2, opened.memory.version, "- codes\n",
                                                 Entry(ts(2023, 1, 3), "Ana and Bob shared door codes.")))
    texts = [h.text for h in await search.search(KEY, "garage code", now=NOW)]
    assert sorted(texts) == ["Ana and Bob shared door codes.", "and the garage code is 2468", "the gate code is 1357"]


async def test_history_entries_and_messages_rank_together_dated(db):
    """A HISTORY.md summary and a consolidated message compete in one ranked list, each dated."""
    chats, _ = await chat(db, [("Ana", "the plumber comes on Tuesday", ts(2023, 2, 1))])
    await chats.handle(KEY).append_history(Entry(ts(2023, 2, 3), "Ana booked a plumber for the leaking kitchen sink."))
    hits = await PgSearch(db).search(KEY, "when does the plumber come for the kitchen sink?", now=NOW)
    assert [(h.source, h.at, h.speaker) for h in hits] == [("history", "2023-02-03 00:00 UTC", None),
                                                           ("user", "2023-02-01 00:00 UTC", "Ana")]


async def test_an_entry_is_dated_with_its_span_and_found_by_dates_within_it(db):
    """An entry whose span (history.until) meets the question's month is boosted and shown with its span."""
    chats, _ = await chat(db, [("Ana", "the boat trip was lovely", ts(2023, 8, 20))])
    async with db.transaction() as conn:
        chat_id = (await (await conn.execute("SELECT id FROM chats WHERE chat_id = 'c'")).fetchone())[0]
        await append_history(conn, chat_id, Entry(ts(2023, 5, 28, 10, 9), "Ana went on a boat trip.",
                                                  ts(2023, 6, 3, 18, 40)))
    hits = await PgSearch(db).search(KEY, "the boat trip in June 2023", now=NOW)
    assert (hits[0].source, hits[0].at) == ("history", "2023-05-28 10:09 UTC – 2023-06-03 18:40 UTC")
    august = await PgSearch(db).search(KEY, "the boat trip in August 2023", now=NOW)
    assert august[0].speaker == "Ana"


async def test_accents_are_folded_both_ways(db):
    """"cafe creme" finds "Café crème" and "Zoë" is found as "zoe", and the other way round."""
    await chat(db, [("Ana", "Un café crème, s'il vous plaît", ts(2023, 1, 1)),
                    ("Bob", "the cafe on the corner sells creme brulee", ts(2023, 1, 2)),
                    ("Ana", "Zoë ordered the soup", ts(2023, 1, 3))])
    search = PgSearch(db)
    assert {h.seq for h in await search.search(KEY, "cafe creme", now=NOW)} >= {0, 1}
    assert {h.seq for h in await search.search(KEY, "café crème brûlée", now=NOW)} >= {0, 1}
    assert [h.text for h in await search.search(KEY, "what did zoe order", now=NOW)][:1] == ["Zoë ordered the soup"]


async def test_a_new_message_becomes_its_predecessors_neighbour(db):
    """A reply appended later is indexed as the previous message's next neighbour, so the question is found too."""
    chats, opened = await chat(db, [("Ana", "where should we go in August?", ts(2023, 7, 1))])
    await chats.append(opened, messages([("Bob", "Norway, the fjords!", ts(2023, 7, 1, 0, 5))]))
    await chats.set_pointer(opened, 2)
    hits = await PgSearch(db).search(KEY, "which fjords in Norway?", now=NOW)
    assert [(h.speaker, h.before, h.after and h.after.speaker) for h in hits] == [
        ("Bob", hits[0].before, None), ("Ana", None, "Bob")]
    assert hits[0].before.text == "where should we go in August?"


async def test_a_long_message_is_shown_as_an_excerpt_around_the_match(db):
    """A text past 600 characters comes back cut around the words asked, marked with … where it is cut."""
    long = " ".join(f"filler{i}" for i in range(150)) + " the spare key is under the blue flowerpot " + \
        " ".join(f"more{i}" for i in range(150))
    await chat(db, [("Ana", long, ts(2023, 1, 1))])
    (top,) = await PgSearch(db).search(KEY, "where is the spare key?", now=NOW)
    assert "spare key is under the blue flowerpot" in top.text and len(top.text) < 600
    assert top.text.startswith("… ") and top.text.endswith(" …")


async def test_a_huge_message_is_kept_and_its_first_200000_characters_searched(db):
    """A 1.2 MB message of distinct words (past a tsvector's 1 MB) is stored and found by its early words."""
    words = [f"w{i:06d}x" for i in range(130_000)]  # 9 characters and a space each: 1.3 MB, all different
    await chat(db, [("Ana", "pineapple " + " ".join(words), ts(2023, 1, 1))])
    search = PgSearch(db)
    (top,) = await search.search(KEY, "pineapple", now=NOW)
    assert top.text.startswith("pineapple w000000x") and top.text.endswith(" …")
    assert await search.search(KEY, words[-1], now=NOW) == []  # past INDEX_CHARS: kept, not indexed


async def test_forget_removes_the_chats_search_rows_and_no_other(db):
    """Erasing a chat deletes its index rows (cascade); another chat's stay and it still finds its own."""
    other = ChatKey("http", "other")
    chats, _ = await chat(db, [("Ana", "my locker code is 4711", ts(2023, 1, 1))])
    await chats.handle(KEY).append_history(Entry(ts(2023, 1, 2), "Ana keeps her locker code in mind."))
    await chat(db, [("Bob", "my locker is number 12", ts(2023, 1, 1))], key=other)
    assert all(await rows(db))
    assert await chats.erase(KEY)
    assert await rows(db) == {table: 0 for table in SEARCH_TABLES}
    async with db.connection() as conn:
        for table in SEARCH_TABLES:
            orphans = await (await conn.execute(
                f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = t.chat)")).fetchone()
            assert orphans[0] == 0, table
    search = PgSearch(db)
    assert await search.search(KEY, "locker code", now=NOW) == []
    assert [h.text for h in await search.search(other, "locker code", now=NOW)] == ["my locker is number 12"]


async def test_a_chat_never_sees_another_chats_rows_or_words(db):
    """Hits, neighbours, respelling candidates and members all come from the chat searched alone."""
    other = ChatKey("telegram", "c")  # the same chat id on another channel
    await chat(db, [("Ana", "my sister studies education in Lima", ts(2023, 1, 1))], key=other)
    await chat(db, [("Bob", "I like my sister's cooking", ts(2023, 1, 1)),
                    ("Carl", "we saw an educational film", ts(2023, 1, 2))])
    search = PgSearch(db)
    hits = await search.search(KEY, "what does Ana's sister study?", now=NOW)
    assert [(h.speaker, h.before, h.after and h.after.speaker) for h in hits] == [("Bob", None, "Carl"),
                                                                                  ("Carl", hits[1].before, None)]
    assert hits[1].before.speaker == "Bob"  # found through its neighbour: this chat's, not Ana's
    assert await search.search(KEY, "Lima", now=NOW) == []
    # "educaton" respelt with the other chat's "education" would find "educational" (one stem): it is not
    assert await search.search(KEY, "educaton", now=NOW) == []
    assert [h.speaker for h in await search.search(KEY, "education", now=NOW)] == ["Carl", "Bob"]  # stems meet
    assert [h.speaker for h in await search.search(other, "educaton in Lima", now=NOW)] == ["Ana"]


async def test_forgetting_a_sender_rebuilds_the_index_from_what_is_left(db):
    """/forget me (the session and history replaced) leaves nothing of the forgotten in the index."""
    chats, _ = await chat(db, [("Ana", "my passport number is X1234567", ts(2023, 1, 1)),
                               ("Bob", "the weather in Lisbon is fine", ts(2023, 1, 2))])
    handle = chats.handle(KEY)
    await handle.append_history(Entry(ts(2023, 1, 3), "Ana shared her passport number."))
    await handle.replace_session(messages([("Bob", "the weather in Lisbon is fine", ts(2023, 1, 2))]), 1)
    await handle.replace_history([])
    search = PgSearch(db)
    assert await search.search(KEY, "passport number", now=NOW) == []
    assert await search.search(KEY, "pasport", now=NOW) == []  # the word is not offered for respelling either
    hits = await search.search(KEY, "Lisbon", now=NOW)
    assert [(h.text, h.seq) for h in hits] == [("the weather in Lisbon is fine", 0)]
    assert await rows(db) == {"search_docs": 1, "search_words": 3, "search_members": 1, "search_stats": 1}


@pytest.mark.parametrize("question", [
    "\"quoted\" 'single' words", "&|!():* <-> !!! ((", "a'b \\ back\\slash 'o''brien'", "NEAR(x y) AND OR NOT",
    "", "   ", "?!.,;", "\x00 nul \x00", "ünïcödé 東京 emoji 🎉 tests", "word " * 5000, "x" * 100_000,
    "_under_score_ __init__", "1357 3.14 10:30 2023-05-01", "summer summer summer plans plans",
])
async def test_punctuation_and_hostile_questions_never_raise(db, question):
    """Quotes, tsquery operators, backslashes, NULs, huge and empty questions all give a list of hits."""
    await chat(db, [("Ana", "summer plans: o'brien said \"hi\" & left (quickly) | 1357 \\o/", ts(2023, 1, 1)),
                    ("Bob", "under_score and __init__ in 東京", ts(2023, 1, 2))])
    hits = await PgSearch(db).search(KEY, question, limit=10, now=NOW)
    assert isinstance(hits, list) and all(h.seq in (0, 1) for h in hits)


async def test_a_chat_that_does_not_exist_finds_nothing(db):
    """Searching a chat never written to returns nothing and creates nothing."""
    assert await PgSearch(db).search(ChatKey("http", "nobody"), "anything at all", now=NOW) == []
    assert await PgChats(db).chats() == []
