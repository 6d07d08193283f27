"""memory/erase.py: one member out of a chat's messages and memory; the files backend's session rewrite
(store/files/chats.py `replace_session`) leaves old or new under SIGKILL."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from memory.erase import Member, drop_section, members, without_turns
from memory.keys import ChatKey
from memory.session import Message, iter_messages, load
from store.base import Entry
from store.files.chats import FileChat, FileChats
from tests import procs
from tests.legality import violations

ROOT = Path(__file__).resolve().parent.parent
GROUP = ChatKey("telegram", "-1")


async def seed(home: Path) -> FileChat:
    """A group chat: Alice (7) and Bob (8) take turns, Alice's second turn with a tool step; 4 consolidated."""
    chats = FileChats(home)
    chat = await chats.open(GROUP)
    call = {"id": "abcdefghi", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}
    await chats.append(chat, [
        Message("user", "my drink is tea-CANARY", sender_id="7", sender_name="Alice"),
        Message("assistant", "noted, Alice"),
        Message("user", "my drink is coffee", sender_id="8", sender_name="Bob"),
        Message("assistant", "noted, Bob"),
        Message("user", "what time is it? pet-CANARY", sender_id="7", sender_name="Alice"),
        Message("assistant", None, tool_calls=(call,)),
        Message("tool", "12:00", tool_call_id="abcdefghi", name="current_time"),
        Message("assistant", "noon"),
        Message("user", "thanks", sender_id="8", sender_name="Bob"),
        Message("assistant", "welcome"),
    ])
    await chats.set_pointer(chat, 4)
    return chats.handle(GROUP)


async def test_drop_turns_keeps_others_and_a_legal_history(tmp_path):
    """Alice's whole turns go (replies and tool steps too); Bob's stay, the pointer still counts consolidated ones."""
    handle = await seed(tmp_path)
    files = handle.files
    kept, pointer, removed = without_turns(await handle.messages(), 4, "7")
    assert removed == 6
    await handle.replace_session(kept, pointer)
    text = files.session.read_text()
    assert "CANARY" not in text and "noted, Alice" not in text and "noon" not in text
    s = load(files, "telegram", "-1")
    assert [m.content for m in iter_messages(files)] == ["my drink is coffee", "noted, Bob", "thanks", "welcome"]
    assert s.last_consolidated == 2 and [m.content for m in s.unconsolidated] == ["thanks", "welcome"]
    assert not violations([{"role": "system", "content": "x"}, *(m.to_llm() for m in s.unconsolidated)])
    assert json.loads(text.splitlines()[0])["record"] == "meta"
    again = (await handle.chats.open(GROUP)).session  # the store loads the rewritten session, not its old copy
    assert again.last_consolidated == 2 and [m.content for m in again.unconsolidated] == ["thanks", "welcome"]


async def test_members_and_sections(tmp_path):
    """Members are known by id and names; their MEMORY.md section goes, another member's stays."""
    handle = await seed(tmp_path)
    alice = members(await handle.messages())["7"]
    assert alice == Member("7", ("Alice",)) and alice.mentioned_in("then ALICE left") and not alice.mentioned_in("Alicex")
    memory = "## Alice\n\n- drink: tea\n\n## Bob\n\n- drink: coffee\n\n## The group\n\n- two people\n"
    assert drop_section(memory, alice) == "## Bob\n\n- drink: coffee\n\n## The group\n\n- two people\n"
    assert drop_section("## Alice (id 7)\n- x\n## Bob\n- y\n", Member("7", ("Alice",))) == "## Bob\n- y\n"


async def test_history_parts_round_trip(tmp_path):
    """HISTORY.md splits into entries and writes back the same, the text before its first entry too."""
    handle = FileChats(tmp_path).handle(GROUP)
    await handle.append_history(Entry(1_700_000_000, "first"))
    await handle.append_history(Entry(1_700_000_060, "second", until=1_700_090_000))
    entries = await handle.history()
    assert [e.text for e in entries] == ["first", "second"] and entries[1].until == 1_700_089_980
    before = handle.files.history.read_text()
    await handle.replace_history(entries)
    assert handle.files.history.read_text() == before
    handle.files.history.write_text("My notes on this chat.\n\n" + before)
    await handle.replace_history(entries[1:])
    assert handle.files.history.read_text() == "My notes on this chat.\n\n" + before[before.index("## ", 1):]


CHILD = """
import asyncio
import sys
from memory import files as memfiles
from memory.erase import without_turns
from memory.keys import ChatKey
from store.files.chats import FileChats
handle = FileChats(sys.argv[1]).handle(ChatKey("telegram", "-1"))
original = handle.files.session.read_text()


async def main():
    print("ready", flush=True)
    while True:
        memfiles.write_atomic(handle.files.session, original)
        kept, pointer, _ = without_turns(await handle.messages(), 4, "7")
        await handle.replace_session(kept, pointer)

asyncio.run(main())
"""


async def test_sigkill_during_the_rewrite_leaves_old_or_new(tmp_path):
    """A process killed at random moments while rewriting the session leaves the whole old or the whole new file."""
    files = (await seed(tmp_path / "data")).files
    old = [m.content for m in iter_messages(files)]
    new = [c for c in old if c in ("my drink is coffee", "noted, Bob", "thanks", "welcome")]
    env = procs.clean_env(home=tmp_path / "home", PYTHONPATH=ROOT)
    random.seed(16)
    seen = set()
    for _ in range(6):
        proc = procs.popen([sys.executable, "-c", CHILD, str(tmp_path / "data")], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            assert proc.stdout.readline() == b"ready\n"
            time.sleep(random.uniform(0.01, 0.15))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        lines = files.session.read_text().splitlines()
        assert all(isinstance(json.loads(line), dict) for line in lines)  # no torn or mixed line
        contents = [m.content for m in iter_messages(files)]
        assert contents in (old, new)
        seen.add(len(contents))
    assert seen
