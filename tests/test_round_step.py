"""A consolidation round's pure steps (memory/consolidate.py): the chunk chosen, the answer read, the [raw]
fallback, what the round writes (`settle`), and the backoff's count (bot/consolidation.py ChatStats); no files,
no database, no model."""

import pytest

from bot.consolidation import BACKOFF, MAX_FAILURES, ChatStats
from memory import tombstones
from memory.consolidate import (Chunk, ConsolidationFailed, MemoryTooLong, Summary, choose_chunk, parse_summary,
                                raw_summary, settle)
from memory.round_request import SAVE_MEMORY, Round
from memory.session import Message
from memory.tokens import count_text

FILLER = " ".join(f"word{i}" for i in range(40))


def turns(n, start_ts=1_700_000_000.0):
    """`n` user/assistant turns, dated a minute apart, each counted."""
    out = []
    for i in range(n):
        for role, text in (("user", f"question {i}: {FILLER}"), ("assistant", f"answer {i}: {FILLER}")):
            out.append(Message(role=role, content=text, ts=start_ts + 60 * len(out), tokens=count_text(text) + 4,
                               sender_id="u" if role == "user" else None))
    return out


def ask(memory="", max_memory=500):
    return Round("2026-01-01", memory, max_memory, max_memory + 600, [SAVE_MEMORY])


def test_a_chunk_is_whole_turns_from_the_pointer():
    """The chunk ends before a user message, starts at the session index given, and removes about the excess."""
    messages = turns(6)
    excess = sum(m.tokens for m in messages[:3])  # a turn and a half
    chunk = choose_chunk(messages, 10, excess, ask(), 100_000)
    assert chunk == Chunk(10, tuple(messages[:4])) and chunk.end == 14


def test_no_chunk_without_a_whole_turn():
    """A single unanswered message is no whole turn: there is nothing to consolidate."""
    assert choose_chunk(turns(1)[:1], 0, 10_000, ask(), 100_000) is None


def test_each_failure_halves_what_a_chunk_may_hold():
    """After failures the same excess takes fewer messages: the transcript's room is halved per failure."""
    messages = turns(40)
    window = ask().tokens(ask().prompt([])) + 2_000
    sizes = [len(choose_chunk(messages, 0, 10**6, ask(), window, failures).messages) for failures in range(3)]
    assert sizes[0] > sizes[1] > sizes[2] >= 2


def test_rest_takes_every_message_that_fits():
    """With `rest` (an import's last round) the chunk is everything left, where it fits the window."""
    messages = turns(3)
    assert choose_chunk(messages, 0, 1, ask(), 100_000, rest=True).messages == tuple(messages)


def test_a_save_memory_answer_is_read():
    """save_memory's arguments (here as JSON text with a trailing comma) are read, trimmed, the memory ending a line."""
    summary = parse_summary('{"history_entry": " They met. ", "memory_update": "- likes tea",}', "- old", 500)
    assert summary == Summary("They met.", "- likes tea\n")


def test_labelled_text_is_read_as_the_two_parts():
    """A model without tools answers in labelled text: the same two parts come out of it."""
    text = "**History entry:** They planned a trip.\n\n**Memory update:**\n- going to Oslo in May"
    assert parse_summary(text, "", 500) == Summary("They planned a trip.", "- going to Oslo in May\n")


@pytest.mark.parametrize("answer, reason", [
    (None, "did not call save_memory"),
    ("I summarised it for you.", "could not be read"),
    ({"history_entry": "x"}, "needs history_entry and memory_update"),
    ({"history_entry": "x", "memory_update": "  "}, "empty while MEMORY.md was not"),
])
def test_an_unusable_answer_fails_the_round_saying_why(answer, reason):
    """An answer that cannot be used raises ConsolidationFailed naming what was wrong."""
    with pytest.raises(ConsolidationFailed, match=reason):
        parse_summary(answer, "- old memory", 500)


def test_a_memory_over_its_cap_fails_as_too_long():
    """A memory_update over the cap is MemoryTooLong, so the next round asks for a shorter one."""
    with pytest.raises(MemoryTooLong):
        parse_summary({"history_entry": "x", "memory_update": FILLER * 5}, "", 50)


def test_the_raw_summary_keeps_the_transcript_and_the_memory():
    """After too many failures the chunk's transcript is the entry, marked [raw], and MEMORY.md stays as it was."""
    summary = raw_summary(Chunk(4, tuple(turns(1))), "- old\n")
    assert summary.history_entry.startswith("[raw] ") and "question 0" in summary.history_entry
    assert summary.memory_update == "- old\n"


def said(*texts, start_ts=1_700_000_000.0):
    """Messages saying `texts`, user and assistant in turn, dated a minute apart."""
    return tuple(Message(role="user" if i % 2 == 0 else "assistant", content=text, ts=start_ts + 60 * i,
                         tokens=count_text(text) + 4, sender_id="u" if i % 2 == 0 else None)
                 for i, text in enumerate(texts))


def test_settle_dates_the_entry_by_its_messages_and_links_each_fact():
    """What a round writes: the entry's span is its messages' own times, and a new fact is linked to the
    message (by its place in the session) that says it."""
    chunk = Chunk(6, said("I play chess every Sunday", "Nice.", "It is cold in Oslo today", "Brr."))
    done = settle(Summary("They talked.", "- plays chess every Sunday\n"), "", chunk, [], {}, [])
    assert (done.first, done.last) == (chunk.messages[0].ts, chunk.messages[-1].ts)
    assert done.memory == "- plays chess every Sunday\n" and done.entry == "They talked." and done.stones == []
    (link,) = done.links.values()
    assert [s["pos"] for s in link["sources"] if s["kind"] == "message"] == [6]


def test_settle_keeps_a_forgotten_fact_out():
    """A fact the chat asked to forget stays out of the new MEMORY.md when the model writes it back from
    messages older than the forgetting."""
    _, stones = tombstones.forget("- likes tea\n", [], tombstones.facts("- likes tea\n"), now=1_800_000_000.0)
    chunk = Chunk(0, said("I like tea", "Noted.", "I play chess", "Nice."))
    done = settle(Summary("They talked.", "- likes tea\n- plays chess\n"), "", chunk, stones, {}, [])
    assert done.memory == "- plays chess\n" and len(done.stones) == 1


def test_failures_back_off_doubling_then_go_raw():
    """Each failure doubles the wait before the chat's next round; the MAX_FAILURES-th says the chunk goes raw."""
    stats = ChatStats()
    said = [stats.failed(ConsolidationFailed("no"), now=1000.0) for _ in range(MAX_FAILURES)]
    assert said == [False] * (MAX_FAILURES - 1) + [True]
    assert stats.retry_at == 1000.0 + BACKOFF * 2 ** (MAX_FAILURES - 1) and stats.last_error == "no"
    stats.succeeded(now=2000.0)
    assert (stats.failures, stats.retry_at, stats.runs, stats.last_run) == (0, 0.0, 1, 2000.0)
