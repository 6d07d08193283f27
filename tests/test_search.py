"""search_history's index and ranking: questions, speakers, neighbours, dates, misspellings, persistence."""

import os
import stat
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from bot.ops import admin
from bot.events import ChatKey
from memory import files as memfiles
from memory.question import read
from memory.search import HistorySearch
from memory.search_index import ChatIndex
from memory.session import Message, SessionStore
from store import open_files

NOW = datetime(2023, 9, 1, 12, tzinfo=timezone.utc)


def ts(*date):
    return datetime(*date, tzinfo=timezone.utc).timestamp()


def chat(tmp_path, lines, chat_id="c", pending=0):
    """A chat whose session holds `lines` [(sender or None for the bot, text, ts)], all but `pending` consolidated."""
    store = SessionStore(tmp_path / "home")
    session = store.get("http", chat_id)
    store.append(session, [Message("assistant", text, ts=at) if who is None else
                           Message("user", text, ts=at, sender_id=who.lower(), sender_name=who)
                           for who, text, at in lines])
    store.set_pointer(session, len(lines) - pending)
    return store, session


def test_question_drops_filler_keeps_possessives_and_names_members():
    """Question words, pronouns and filler go; "Ana's" is Ana, and a member's first name names that member."""
    q = read("What would Ana's plans likely be for her summer?", members=["Ana Lopez", "Bob"])
    assert q.terms == ("ana", "plans", "summer") and q.names == ("ana lopez",) and q.since is None


def test_question_dates_become_a_range_in_the_chat_zone():
    """"in May 2023", a bare month and "last year" become time ranges, in the given zone, not search words."""
    tokyo = ZoneInfo("Asia/Tokyo")
    q = read("where did we eat in May 2023?", now=NOW.astimezone(tokyo))
    assert q.terms == ("eat",)
    assert (q.since, q.until) == (datetime(2023, 5, 1, tzinfo=tokyo).timestamp(),
                                  datetime(2023, 6, 1, tzinfo=tokyo).timestamp())
    assert read("the concert in December", now=NOW).since == ts(2022, 12, 1)  # the latest December before now
    assert read("trips last year", now=NOW).until == ts(2023, 1, 1)
    assert read("may I ask about the trip", now=NOW).since is None  # "may" without a cue is not a month
    assert read("did they march in the parade", now=NOW).terms == ("march", "parade")
    assert read("what happened 3 weeks ago", now=NOW).until == ts(2023, 8, 17)  # about 21 days, give or take 5


def test_the_answer_in_a_reply_is_found_with_its_question_and_speaker(tmp_path):
    """The reply that never repeats the question's words is found through its neighbour, named, in context."""
    _, session = chat(tmp_path, [("Bob", "Ana, what are your plans for the summer?", ts(2023, 5, 2)),
                                 ("Ana", "Hiking the Inca trail in Peru with my sister!", ts(2023, 5, 2, 0, 1)),
                                 ("Bob", "Wow, bring me a souvenir", ts(2023, 5, 2, 0, 2)),
                                 ("Bob", "My summer plans: nothing much, work.", ts(2023, 7, 1)),
                                 (None, "Sounds restful.", ts(2023, 7, 1, 0, 1))])
    hits = HistorySearch().search(session.files, "What are Ana's plans for the summer?", now=NOW)
    top = hits[0]
    assert (top.speaker, top.text) == ("Ana", "Hiking the Inca trail in Peru with my sister!")
    assert top.before.speaker == "Bob" and "summer" in top.before.text and top.after.text == "Wow, bring me a souvenir"


def test_a_misspelt_word_finds_the_word_the_chat_used(tmp_path):
    """"educaton" matches nothing, so the closest word the chat used ("education") is searched instead."""
    _, session = chat(tmp_path, [("Ana", "I want to go back into education next year", ts(2023, 3, 1)),
                                 ("Bob", "The weather is nice", ts(2023, 3, 2))])
    hits = HistorySearch().search(session.files, "what did Ana say about educaton?", now=NOW)
    assert [h.text for h in hits][:1] == ["I want to go back into education next year"]


def test_dates_in_the_question_favour_what_was_said_then(tmp_path):
    """Of two equal messages, the one within "May 2023" in the chat's zone ranks first."""
    lines = [("Ana", "we had dinner at the harbour", ts(2023, 4, 30, 20)),  # 1 May in Tokyo, 30 April in UTC
             ("Ana", "we had dinner at the harbour", ts(2023, 6, 10))]
    _, session = chat(tmp_path, lines)
    search = HistorySearch()
    tokyo = search.search(session.files, "dinner in May 2023", zone=ZoneInfo("Asia/Tokyo"), now=NOW)
    utc = search.search(session.files, "dinner in June 2023", now=NOW)
    assert tokyo[0].seq == 0 and utc[0].seq == 1


def test_history_entries_and_messages_rank_together_dated(tmp_path):
    """A HISTORY.md summary and a consolidated message compete in one ranked list, each dated."""
    _, session = chat(tmp_path, [("Ana", "the plumber comes on Tuesday", ts(2023, 2, 1))])
    memfiles.append_history(session.files, "Ana booked a plumber for the leaking kitchen sink.", when=ts(2023, 2, 3))
    hits = HistorySearch().search(session.files, "when does the plumber come for the kitchen sink?", now=NOW)
    assert [(h.source, h.at) for h in hits] == [("history", "2023-02-03 00:00 UTC"), ("user", "2023-02-01 00:00 UTC")]


def test_index_is_private_persisted_and_incremental(tmp_path):
    """search.sqlite is 0600, a restart reads nothing again, and a new message updates its neighbour in place."""
    store, session = chat(tmp_path, [("Ana", "where should we go in August?", ts(2023, 7, 1))], pending=0)
    first = HistorySearch()
    first.search(session.files, "August", now=NOW)
    path = session.files.search_index
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    size = session.files.session.stat().st_size
    restarted = ChatIndex(session.files)
    assert restarted._open() and restarted._get("session.offset") == size  # where the last process stopped
    store.append(session, [Message("user", "Norway, the fjords!", ts=ts(2023, 7, 1, 0, 5), sender_id="b",
                                   sender_name="Bob")])
    store.set_pointer(session, 2)
    restarted.refresh()
    rows = restarted.db.execute("SELECT id, around FROM docs ORDER BY id").fetchall()
    assert rows == [(1, "Norway, the fjords!"), (2, "where should we go in August?")]
    hits = first.search(session.files, "which fjords in Norway?", now=NOW)  # the older object indexes nothing twice
    assert [h.speaker for h in hits] == ["Bob", "Ana"]
    assert restarted.db.execute("SELECT count(*) FROM docs").fetchone()[0] == 2


def test_a_damaged_index_is_rebuilt(tmp_path):
    """An index file that is not a database is replaced by a fresh one built from the chat's files."""
    _, session = chat(tmp_path, [("Ana", "the code for the gate is 1357", ts(2023, 1, 1))])
    session.files.search_index.write_bytes(b"not a database at all" * 100)
    hits = HistorySearch().search(session.files, "gate code", now=NOW)
    assert [h.text for h in hits] == ["the code for the gate is 1357"]


async def test_forget_deletes_the_index_and_search_finds_nothing_after(tmp_path):
    """`tusk forget` (the same /forget) lists and deletes search.sqlite; a search afterwards creates nothing."""
    _, session = chat(tmp_path, [("Ana", "my locker code is 4711", ts(2023, 1, 1))])
    search = HistorySearch()
    assert search.search(session.files, "locker", now=NOW)
    home = tmp_path / "home"
    chats = open_files(home).chats
    assert "search index" in await admin.forget(chats, home, ChatKey("http", "c"), confirm=False)
    report = await admin.forget(chats, home, ChatKey("http", "c"), confirm=True)
    assert "deleted the search index of the above (search.sqlite)" in report and "FAILED" not in report
    assert not session.files.dir.exists()
    assert search.search(session.files, "locker", now=NOW) == [] and not session.files.dir.exists()
