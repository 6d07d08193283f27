"""`tusk import` folds what it brings into memory: the estimate first (nothing written without --yes), then
bounded consolidation rounds recorded under the purpose "import", resumable after a kill or a failing model."""

import asyncio
import json
import os
import signal

import pytest

from tests import procs
from tests.fakes.loopback import wait_until
from tests.fakes.fake_llm import Reply, attributing_responder
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests.test_import import FIXTURES, session


@pytest.fixture(autouse=True)
def summarising(fake_llm):
    fake_llm.responder = attributing_responder


def rounds(fake_llm) -> list[dict]:
    """The consolidation requests the fake model got (they offer `save_memory`)."""
    return [b for b in fake_llm.requests if any(t["function"]["name"] == "save_memory" for t in b.get("tools") or [])]


def records(home, channel, chat, kind):
    path = home / "chats" / channel / chat / "session.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("record") == kind]


def write_export(path, name, chat_id, sender, start, gap, texts):
    """A personal-chat Telegram Desktop export, as its docs give the format: one message of `sender` (a name,
    an id) per text, `gap` seconds apart from the unix time `start`."""
    messages = [{"id": i, "type": "message", "date_unixtime": str(start + gap * i), "from": sender[0],
                 "from_id": sender[1], "text": text} for i, text in enumerate(texts)]
    with open(path, "w") as fh:
        json.dump({"name": name, "type": "personal_chat", "id": chat_id, "messages": messages}, fh)


def telegram_export(path, n, words=12):
    """An export of `n` notes of `words` words each, a minute apart."""
    write_export(path, "Long", 77, ("Al", "user77"), 1700000000, 60,
                 [f"note {i}: " + " ".join(f"w{i}x{k}" for k in range(words)) for i in range(n)])


def answer_slowly(fake_llm, delay=0.2):
    """Each answer of the fake model comes after `delay` s, so that a fold can be caught in the middle."""
    def slowly(body):
        reply = attributing_responder(body)
        reply.delay = delay
        return reply

    fake_llm.responder = slowly


async def until_rounds(fake_llm, n, timeout):
    """Wait until the fake model was asked for `n` consolidation rounds."""
    await wait_until(lambda: len(rounds(fake_llm)) >= n, timeout, lambda: f"({len(rounds(fake_llm))} rounds)")


async def resumed_after_a_kill(fake_llm, export, env, after, timeout):
    """`tusk import <export> --yes` killed (SIGKILL) once `after` rounds were asked for, then the same command
    again with a model that answers at once: its (exit code, stdout, stderr)."""
    answer_slowly(fake_llm)
    proc = await procs.start_tusk("import", str(export), "--yes", env=env)
    await until_rounds(fake_llm, after, timeout)
    os.kill(proc.pid, signal.SIGKILL)
    await proc.wait()
    fake_llm.responder = attributing_responder
    return await tusk_cli("import", str(export), "--yes", env=env)


async def test_the_estimate_comes_first_and_yes_fills_memory_under_import(fake_llm, tmp_path):
    """Without --yes: counts, rounds, tokens and a price (litellm's table for a known model), nothing written
    and no model call. With --yes: MEMORY.md and HISTORY.md written, the rounds in the ledger as "import"."""
    env = env_for(fake_llm, tmp_path, TUSK_MODEL="openai/gpt-4o-mini")
    home = tmp_path / "data"
    code, out, err = await tusk_cli("import", str(FIXTURES / "telegram_one.json"), env=env)
    assert code == 0, err
    assert "6 messages for telegram:4242" in out and "Nothing written: add --yes" in out
    assert "consolidation round(s) with openai/gpt-4o-mini" in out and "about $" in out
    assert not (home / "chats").exists() and not rounds(fake_llm)

    code, out, err = await tusk_cli("import", str(FIXTURES / "telegram_one.json"), "--yes", env=env)
    assert code == 0, err
    assert "Imported 6 messages (0 already there) into 1 chat(s); 6 messages folded" in out
    chat = home / "chats/telegram/4242"
    assert "Alice" in (chat / "MEMORY.md").read_text() and (chat / "HISTORY.md").read_text().startswith("## ")
    assert records(home, "telegram", "4242", "pointer")[-1]["last_consolidated"] == 6
    code, out, _ = await tusk_cli("usage", "--by", "purpose", "--json", env=env)
    by_purpose = {row["purpose"]: row for row in json.loads(out)}
    assert by_purpose["import"]["calls"] == len(rounds(fake_llm)) and "consolidation" not in by_purpose
    code, out, _ = await tusk_cli("usage", "--by", "chat", "--json", env=env)
    assert [row["chat"] for row in json.loads(out)] == ["telegram:4242"]


async def test_a_long_history_folds_in_bounded_rounds_while_it_lands(fake_llm, tmp_path):
    """A history many times the window: many rounds, the first ones before the last message is written (the
    session does not hold the whole export unconsolidated), and at the end nothing left unconsolidated."""
    export = tmp_path / "long.json"
    telegram_export(export, 1500)
    env = env_for(fake_llm, tmp_path, TUSK_CONTEXT_WINDOW="4096")
    home = tmp_path / "data"
    code, _, err = await tusk_cli("import", str(export), "--yes", env=env)
    assert code == 0, err
    lines = (home / "chats/telegram/77/session.jsonl").read_text().splitlines()
    first_pointer = next(i for i, line in enumerate(lines) if '"pointer"' in line)
    assert first_pointer < len(lines) - 1000  # folded while the messages were still landing
    assert records(home, "telegram", "77", "pointer")[-1]["last_consolidated"] == 1500
    entries = (home / "chats/telegram/77/HISTORY.md").read_text().count("\n## ")
    assert entries + 1 == len(rounds(fake_llm)) > 10
    assert max(len(json.dumps(b)) for b in rounds(fake_llm)) < 4 * 4096 * 2  # each round fits the window


async def test_a_kill_mid_fold_resumes_without_duplicates_or_lost_rounds(fake_llm, tmp_path):
    """kill -9 while rounds run; the same command again: every message once, every message folded once."""
    export = tmp_path / "long.json"
    telegram_export(export, 1200)
    env = env_for(fake_llm, tmp_path, TUSK_CONTEXT_WINDOW="4096")
    home = tmp_path / "data"
    code, _, err = await resumed_after_a_kill(fake_llm, export, env, after=3, timeout=30)
    assert code == 0, err
    ids = [m["import"] for m in session(home, "telegram", "77")]
    assert len(ids) == len(set(ids)) == 1200
    pointers = [r["last_consolidated"] for r in records(home, "telegram", "77", "pointer")]
    assert pointers == sorted(pointers) and pointers[-1] == 1200


async def test_a_failing_model_stops_the_fold_keeps_the_messages_and_the_rerun_goes_on(fake_llm, tmp_path):
    """The model errors: the import says so and exits non-zero, no raw transcript is filed as memory, the
    messages stay; run again with a working model, it adds no message and folds them."""
    env = env_for(fake_llm, tmp_path)
    home = tmp_path / "data"
    fake_llm.responder = lambda body: Reply(status=500, raw_body='{"error": {"message": "upstream down"}}')
    code, out, err = await tusk_cli("import", str(FIXTURES / "telegram_one.json"), "--yes", env=env)
    assert code == 1 and "consolidation stopped" in out and "run the same command again" in out
    chat = home / "chats/telegram/4242"
    assert len(session(home, "telegram", "4242")) == 6 and not records(home, "telegram", "4242", "pointer")
    assert not (chat / "HISTORY.md").exists() or "[raw]" not in (chat / "HISTORY.md").read_text()

    fake_llm.responder = attributing_responder
    code, out, err = await tusk_cli("import", str(FIXTURES / "telegram_one.json"), "--yes", env=env)
    assert code == 0, err
    assert "Imported 0 messages (6 already there)" in out and "; 6 messages folded" in out
    assert (chat / "MEMORY.md").exists() and len(session(home, "telegram", "4242")) == 6


async def test_ctrl_c_at_a_terminal_stops_with_a_word_and_the_rerun_goes_on(fake_llm, tmp_path):
    """At a terminal: a progress bar; Ctrl-C mid-fold ends it with exit status 130 and how to go on; the same
    command again finishes the job without duplicates."""
    import pexpect

    export = tmp_path / "long.json"
    telegram_export(export, 1200)
    env = env_for(fake_llm, tmp_path, TUSK_CONTEXT_WINDOW="4096")
    home = tmp_path / "data"
    answer_slowly(fake_llm)
    child = procs.spawn_tusk("import", str(export), "--yes", env=env, cwd=tmp_path, timeout=60)
    await asyncio.to_thread(child.expect, "folded into memory")
    await until_rounds(fake_llm, 2, timeout=30)
    child.sendintr()
    await asyncio.to_thread(child.expect, "Interrupted: what was written is kept")
    await asyncio.to_thread(child.expect, pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    fake_llm.responder = attributing_responder
    code, _, err = await tusk_cli("import", str(export), "--yes", env=env)
    assert code == 0, err
    ids = [m["import"] for m in session(home, "telegram", "77")]
    assert len(ids) == len(set(ids)) == 1200
    assert records(home, "telegram", "77", "pointer")[-1]["last_consolidated"] == 1200


async def test_without_a_model_the_import_says_what_to_set_and_writes_nothing(tmp_path):
    env = procs.clean_env(TUSK_HOME=tmp_path / "data")
    code, out, err = await tusk_cli("import", str(FIXTURES / "telegram_one.json"), "--yes", env=env)
    assert code == 1 and "6 messages for telegram:4242" in out and "TUSK_MODEL is not set" in err
    assert "Traceback" not in err and not (tmp_path / "data" / "chats").exists()


DENSE_START = 1685613600  # 2023-06-01 10:00 UTC


def dense_export(path, n):
    """A Telegram export of `n` messages in June 2023, five minutes apart, in lines that tokenize far denser than
    four characters a token (ids of letters, digits and dashes), like a real chat full of references."""
    write_export(path, "Ada", 61, ("Ada Lovelace", "user61"), DENSE_START, 300,
                 [f"r{846 + i % 7}-c61-m{i:06d} the train was late again" for i in range(n)])


def request_tokens(body) -> int:
    """A request's tokens as a tokenizer counts them: every message, the tool schemas, and the room asked for
    the reply (max_tokens)."""
    from memory.tokens import count_message, count_text

    return (sum(count_message(m) for m in body["messages"]) + count_text(json.dumps(body.get("tools") or []))
            + (body.get("max_tokens") or 0))


async def test_dense_lines_resumed_after_a_kill_keep_every_round_within_the_window(fake_llm, tmp_path):
    """3,000 dense messages at TUSK_CONTEXT_WINDOW=8192, killed mid-fold and run again: every consolidation
    request, the transcript with its dated speaker lines, MEMORY.md, instructions, tool schema and the reply's
    room, counts at most 8,192 tokens, and everything ends folded."""
    export = tmp_path / "dense.json"
    dense_export(export, 3000)
    env = env_for(fake_llm, tmp_path, TUSK_CONTEXT_WINDOW="8192")
    home = tmp_path / "data"
    code, _, err = await resumed_after_a_kill(fake_llm, export, env, after=2, timeout=60)
    assert code == 0, err
    assert records(home, "telegram", "61", "pointer")[-1]["last_consolidated"] == 3000
    sizes = [request_tokens(b) for b in rounds(fake_llm)]
    assert len(sizes) > 3 and max(sizes) <= 8192, sizes


async def test_imported_2023_messages_are_dated_2023_in_history_and_in_search(fake_llm, tmp_path):
    """Each HISTORY.md entry folded from an imported June 2023 chat is headed with the span of its own messages'
    times (not the day of the import), and search_history ("when was ...?") answers with that span."""
    from datetime import datetime, timezone

    export = tmp_path / "dense.json"
    dense_export(export, 600)
    env = env_for(fake_llm, tmp_path, TUSK_CONTEXT_WINDOW="4096")
    home = tmp_path / "data"
    code, _, err = await tusk_cli("import", str(export), "--yes", "--to", "terminal:ada", env=env)
    assert code == 0, err
    cuts = [0] + [r["last_consolidated"] for r in records(home, "terminal", "ada", "pointer")]
    assert cuts[-1] == 600 and len(cuts) > 3
    stamp = lambda i: datetime.fromtimestamp(DENSE_START + 300 * i, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    spans = [f"{stamp(a)} – {stamp(b - 1)}" for a, b in zip(cuts, cuts[1:])]
    history = (home / "chats/terminal/ada/HISTORY.md").read_text()
    assert [line[3:] for line in history.splitlines() if line.startswith("## ")] == spans

    second = cuts[1]  # the first message of the second entry, which the entry quotes
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "search_history", {"query": f"when was m{second:06d}?"})]),
                    Reply(text="found it"))
    code, out, err = await tusk_cli("chat", "--chat", "ada", env=env, stdin=f"when was m{second:06d}?\n".encode())
    assert code == 0 and "found it" in out, err
    result = next(m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool")
    assert f"[HISTORY.md, {spans[1]}]" in result and f"[messages, {stamp(second)}]" in result, result
