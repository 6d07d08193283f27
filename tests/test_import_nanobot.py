"""`tusk import --format nanobot`: nanobot-ai 0.3's instance folder, workspace or one session file, read from
fixtures nanobot itself wrote (tests/fixtures/imports/make_nanobot.py); malformed or hostile files refused."""

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.ops.imports import nanobot
from bot.ops.imports.model import ImportRefused
from bot.ops.imports.nanobot_layout import chat_of
from tests.fakes.fake_llm import attributing_responder
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli

FIXTURES = Path(__file__).parent / "fixtures" / "imports"
V030, V035 = FIXTURES / "nanobot030", FIXTURES / "nanobot035"
NAMESPACE = V035 / "sessions" / "0123456789abcdef0123456789abcdef"
TELEGRAM = "dGVsZWdyYW06NDI0Mg.jsonl"  # base64url of "telegram:4242", as nanobot 0.3 names it
MEMORY = "## The user\n\n- The user's dog is Rex.\n- The user lives in Oslo.\n"


def local(text: str) -> float:
    """nanobot writes local time without an offset."""
    return datetime.fromisoformat(text).timestamp()


def by_chat(path) -> dict:
    out: dict = {}
    for msg in nanobot.read(path):
        out.setdefault(msg.chat, []).append(msg)
    return out


def session_file(tmp_path, *records, name=TELEGRAM) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


META = {"_type": "metadata", "key": "telegram:7", "created_at": "2026-03-01T10:00:00",
        "updated_at": "2026-03-01T10:00:00", "metadata": {}, "last_consolidated": 0}


@pytest.mark.parametrize("instance", [V030, V035], ids=["0.3.0", "0.3.5"])
def test_instance_folder_gives_each_chat_its_messages(instance):
    """telegram:4242 and discord:900100 land in their chats, cli:direct has none (it needs --to)."""
    chats = by_chat(instance)
    assert set(chats) == {("telegram", "4242"), ("discord", "900100"), None}
    assert [m.text for m in chats[None]] == ["hello from the terminal", "Noted: hello from the terminal"]


@pytest.mark.parametrize("instance", [V030, V035], ids=["0.3.0", "0.3.5"])
def test_roles_dates_and_media_are_kept(instance):
    """User and assistant turns with nanobot's dates; an attached picture becomes `[image]`."""
    tg = by_chat(instance)[("telegram", "4242")]
    assert [(m.role, m.text) for m in tg] == [
        ("user", "My dog is called Rex"), ("assistant", "Noted: My dog is called Rex"),
        ("user", "I live in Oslo"), ("assistant", "Noted: I live in Oslo"),
        ("user", "[image] What is in this image?"), ("assistant", "A tiny white square.")]
    assert tg[0].ts == local("2026-03-01T10:00:21")
    assert [m.ts for m in tg] == sorted(m.ts for m in tg)


@pytest.mark.parametrize("instance", [V030, V035], ids=["0.3.0", "0.3.5"])
def test_tool_steps_are_left_out(instance):
    """The tool call and its result are not messages; the answer after them is."""
    dc = by_chat(instance)[("discord", "900100")]
    assert [(m.role, m.text) for m in dc] == [("user", "Which files do I have?"),
                                              ("assistant", "Your workspace has a memory folder.")]


@pytest.mark.parametrize("instance", [V030, V035], ids=["0.3.0", "0.3.5"])
def test_what_nanobot_consolidated_is_settled(instance):
    """The messages before `last_consolidated` (nanobot's own consolidation) are marked settled, no others;
    0.3.5's hidden compaction checkpoint is not imported."""
    tg = by_chat(instance)[("telegram", "4242")]
    assert [m.settled for m in tg] == [True] * 4 + [False] * 2
    assert not any("checkpoint" in m.text for m in tg)


def test_workspace_instance_and_one_file_agree():
    """The workspace folder finds the same sessions as the instance folder (0.3.5 keeps them beside it);
    one session file gives its chat alone."""
    assert list(nanobot.read(V035 / "workspace")) == list(nanobot.read(V035))
    assert list(nanobot.read(V030 / "workspace")) == list(nanobot.read(V030))
    one = list(nanobot.read(NAMESPACE / TELEGRAM))
    assert {m.chat for m in one} == {("telegram", "4242")} and len(one) == 6


def test_ids_are_unique_and_stable(tmp_path):
    """Reading twice gives the same ids; when nanobot trims a session's head, the rest keep theirs."""
    first = [m.source_id for m in nanobot.read(V030)]
    assert first == [m.source_id for m in nanobot.read(V030)] and len(set(first)) == len(first)
    lines = (V030 / "workspace/sessions" / TELEGRAM).read_text().splitlines()
    meta = json.loads(lines[0]) | {"last_consolidated": 0}
    trimmed = session_file(tmp_path, meta, *map(json.loads, lines[3:]))
    assert [m.source_id for m in nanobot.read(trimmed)] == [m.source_id for m in nanobot.read(V030 / "workspace/sessions" / TELEGRAM)][2:]


def test_older_layout_and_its_file_names(tmp_path):
    """The existing fixture's `sessions/telegram_55.jsonl` (names before 0.3) still reads; a key is taken from
    a base64 file name when the metadata record lacks it."""
    assert {m.chat for m in nanobot.read(FIXTURES / "nanobot")} == {("telegram", "55")}
    path = session_file(tmp_path, {"_type": "metadata"}, {"role": "user", "content": "hi", "timestamp": "2026-03-01T10:00:00"})
    assert next(nanobot.read(path)).chat == ("telegram", "4242")


def test_chat_keys_map_to_tusk_chats():
    """Topics, threads and Slack threads become the chat ids Tusk's adapters use; other channels none."""
    assert chat_of("telegram:-1001:topic:7") == ("telegram", "-1001.7")
    assert chat_of("discord:100:thread:200") == ("discord", "200")
    assert chat_of("slack:C1:1700000000.000100") == ("slack", "C1-1700000000.000100")
    assert chat_of("slack:D9") == ("slack", "D9")
    for key in ("cli:direct", "unified:default", "websocket:abc", "feishu:ou_1", "telegram:", "telegram:1:x"):
        assert chat_of(key) is None, key


def test_content_parts_runtime_context_and_hidden_records(tmp_path):
    """List content is joined with `[image]` for pictures; nanobot's appended runtime context, slash commands,
    hidden records, subagent reports and other record types are left out."""
    suffix = "[Runtime Context — metadata only, not instructions]\nchannel: telegram\n[/Runtime Context]"
    path = session_file(
        tmp_path, META,
        {"_type": "provider_state", "state": {}},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}],
         "timestamp": "2026-03-01T10:00:01"},
        {"role": "user", "content": "hello\n\n" + suffix, "_runtime_context": {"version": 1, "suffix": suffix},
         "timestamp": "2026-03-01T10:00:02"},
        {"role": "user", "content": "/help", "_command": True, "timestamp": "2026-03-01T10:00:03"},
        {"role": "user", "content": "Continue.", "_hidden_history": True, "timestamp": "2026-03-01T10:00:04"},
        {"role": "assistant", "content": "done", "injected_event": "subagent_result", "timestamp": "2026-03-01T10:00:05"},
        {"role": "assistant", "content": "[Message Time: 10:00]\nHi!", "timestamp": "2026-03-01T10:00:06",
         "reasoning_content": "think"},
        {"role": "user", "content": "", "media": ["/x/report.pdf"], "timestamp": "2026-03-01T10:00:07"},
        {"role": "system", "content": "x", "timestamp": "2026-03-01T10:00:08"})
    assert [m.text for m in nanobot.read(path)] == ["look [image]", "hello", "Hi!", "[file report.pdf]"]


def test_nanobots_own_runs_are_skipped_in_a_folder(tmp_path):
    """cron:, dream: and heartbeat sessions are not conversations: a folder's import leaves them out."""
    session_file(tmp_path, META | {"key": "dream:20260301-100000"},
                 {"role": "user", "content": "edit memory", "timestamp": "2026-03-01T10:00:00"}, name="a.jsonl")
    session_file(tmp_path, META, {"role": "user", "content": "hi", "timestamp": "2026-03-01T10:00:00"}, name="b.jsonl")
    assert [m.text for m in nanobot.read(tmp_path)] == ["hi"]


def test_memory_files_from_the_workspace():
    """MEMORY.md as nanobot has it; history.jsonl's entries as Tusk's dated HISTORY.md entries."""
    for path in (V030, V035, V035 / "workspace", NAMESPACE / TELEGRAM):
        files = nanobot.memory_files(path)
        assert files["MEMORY.md"] == MEMORY, path
        stamp = datetime.fromisoformat("2026-03-01T10:30").astimezone(UTC).strftime("%Y-%m-%d %H:%M")
        assert files["HISTORY.md"] == f"## {stamp} UTC\n\nUser has a dog called Rex and lives in Oslo.\n\n"
    assert nanobot.memory_files(FIXTURES / "nanobot") == {}


def test_one_session_file_takes_its_own_history(tmp_path):
    """From one session file, only that session's history entries (and unnamed ones) are taken; from a
    folder, all but nanobot's own runs."""
    copy = tmp_path / "nb"
    shutil.copytree(V030, copy)
    with open(copy / "workspace/memory/history.jsonl", "a") as fh:
        fh.writelines(json.dumps({"cursor": n, "timestamp": "2026-03-02 09:00", "content": f"entry {n}",
                                  **({"session_key": key} if key else {})}) + "\n"
                      for n, key in ((2, "discord:900100"), (3, None), (4, "cron:job1")))
    one = nanobot.memory_files(copy / "workspace/sessions" / TELEGRAM)["HISTORY.md"]
    assert "Rex" in one and "entry 3" in one and "entry 2" not in one
    every = nanobot.memory_files(copy)["HISTORY.md"]
    assert "entry 2" in every and "entry 3" in every and "entry 4" not in every


def test_history_md_before_0_3(tmp_path):
    """A workspace not yet migrated: HISTORY.md's `[YYYY-MM-DD HH:MM]` paragraphs become dated entries."""
    (tmp_path / "sessions").mkdir()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory/HISTORY.md").write_text("[2026-01-02 09:00] Talked about Rex.\n\n[2026-01-03 10:00] Oslo.\n")
    history = nanobot.memory_files(tmp_path)["HISTORY.md"]
    assert history.count("## 2026-01-0") == 2 and "Talked about Rex." in history and "[2026" not in history


def test_detect():
    """nanobot's folders and session files are recognised; other exports are not."""
    for path in (V030, V035, V035 / "workspace", NAMESPACE / TELEGRAM, FIXTURES / "nanobot"):
        assert nanobot.detect(path), path
    assert not nanobot.detect(FIXTURES / "telegram_one.json")
    assert not nanobot.detect(FIXTURES)


def refused(path, *words):
    with pytest.raises(ImportRefused) as err:
        list(nanobot.read(path))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_malformed_and_truncated_files_are_refused(tmp_path):
    """A cut-off last line, a record that is not an object, an unreadable date: refused with the line."""
    good = (NAMESPACE / TELEGRAM).read_text()
    cut = tmp_path / "cut" / TELEGRAM
    cut.parent.mkdir()
    cut.write_text(good[:-30])
    refused(cut, TELEGRAM, "cut short")
    refused(session_file(tmp_path, META, ["not", "a", "record"]), "not a JSON object")
    refused(session_file(tmp_path, META, {"role": "user", "content": "x", "timestamp": "yesterday"}), "timestamp")
    refused(session_file(tmp_path, META, {"role": "user", "content": "x"}), "timestamp")


def test_hostile_files_are_refused(tmp_path):
    """Deep nesting (a JSON bomb), a line of megabytes, a huge MEMORY.md, a link out of the folder: refused."""
    refused(session_file(tmp_path, META, {"role": "user", "content": "x", "timestamp": "2026-03-01T10:00:00",
                                          "x": json.loads("[" * 100 + "]" * 100)}), "deeper")
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(META) + "\n" + '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    refused(deep, "deep")
    refused(session_file(tmp_path, META, {"role": "user", "content": "x" * (5 << 20), "timestamp": "2026-03-01"}),
            "bytes")
    link = tmp_path / "links"
    link.mkdir()
    os.symlink(NAMESPACE / TELEGRAM, link / TELEGRAM)
    refused(link, "symbolic link")
    big = tmp_path / "big"
    shutil.copytree(V030, big)
    (big / "workspace/memory/MEMORY.md").write_text("x" * (2 << 20))
    refused(big, "MEMORY.md", "refused")


def test_several_workspaces_sessions_are_not_guessed(tmp_path):
    """0.3.5's sessions folder holding several workspaces, and no id to choose one: refused, naming the fix."""
    copy = tmp_path / "nb"
    shutil.copytree(V035, copy)
    (copy / "workspace/.nanobot/workspace-id").unlink()
    shutil.copytree(copy / "sessions/0123456789abcdef0123456789abcdef", copy / "sessions" / ("f" * 32))
    refused(copy, "2 nanobot workspaces", "sessions/<workspace id>")


def test_nothing_to_read_is_refused(tmp_path):
    """An empty folder is not a nanobot workspace."""
    refused(tmp_path, "no nanobot session files")


def chat_messages(home, channel, chat):
    path = home / "chats" / channel / chat / "session.jsonl"
    return [rec for rec in map(json.loads, path.read_text().splitlines()) if "role" in rec and "record" not in rec]


async def test_tusk_import_yes_brings_a_chat_and_its_memory(fake_llm, tmp_path):
    """`tusk import FILE --format nanobot --yes`: the chat's messages with their dates, nanobot's MEMORY.md
    where the chat had none; a second run adds nothing."""
    fake_llm.responder = attributing_responder
    env = env_for(fake_llm, tmp_path)
    home = tmp_path / "data"
    source = str(NAMESPACE / TELEGRAM)
    for _ in range(2):
        code, out, err = await tusk_cli("import", source, "--format", "nanobot", "--yes", env=env)
        assert code == 0, err
    assert "(6 already there)" in out and "Nothing to do" in out
    msgs = chat_messages(home, "telegram", "4242")
    assert [(m["role"], m["content"]) for m in msgs][:2] == [("user", "My dog is called Rex"),
                                                            ("assistant", "Noted: My dog is called Rex")]
    assert len(msgs) == 6 and msgs[0]["ts"] == local("2026-03-01T10:00:21")
    assert "The user's dog is Rex." in (home / "chats/telegram/4242/MEMORY.md").read_text()
    rounds = [b for b in fake_llm.requests if any(t["function"]["name"] == "save_memory" for t in b.get("tools") or [])]
    assert rounds and all("The user's dog is Rex." in json.dumps(b) for b in rounds)  # taken before folding
    assert not any("My dog is called Rex" in json.dumps(b) for b in rounds)  # nanobot had consolidated those
    assert "Rex and lives in Oslo" in (home / "chats/telegram/4242/HISTORY.md").read_text()


async def test_tusk_import_of_an_instance_needs_to_for_other_channels(fake_llm, tmp_path):
    """nanobot's cli:direct session is no Tusk chat: the instance's import asks for --to, writing nothing."""
    env = env_for(fake_llm, tmp_path)
    code, _, err = await tusk_cli("import", str(V035), "--yes", env=env)
    assert code == 1 and "--to CHANNEL:ID" in err
    assert not (tmp_path / "data" / "chats").exists()
