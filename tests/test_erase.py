"""memory/erase.py: one member out of a chat's files; a SIGKILL during the session rewrite leaves old or new."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from memory import files as memfiles
from memory.erase import Member, drop_section, drop_turns, history_parts, members
from memory.paths import ChatFiles
from memory.session import Message, SessionStore, iter_messages, load
from tests import procs
from tests.legality import violations

ROOT = Path(__file__).resolve().parent.parent


def seed(home: Path) -> ChatFiles:
    """A group chat: Alice (7) and Bob (8) take turns, Alice's second turn with a tool step; 4 consolidated."""
    store = SessionStore(home)
    s = store.get("telegram", "-1")
    call = {"id": "abcdefghi", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}
    store.append(s, [
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
    store.set_pointer(s, 4)
    return s.files


def test_drop_turns_keeps_others_and_a_legal_history(tmp_path):
    """Alice's whole turns go (replies and tool steps too); Bob's stay, the pointer still counts consolidated ones."""
    files = seed(tmp_path)
    assert drop_turns(files, "7") == 6
    text = files.session.read_text()
    assert "CANARY" not in text and "noted, Alice" not in text and "noon" not in text
    s = load(files, "telegram", "-1")
    assert [m.content for m in iter_messages(files)] == ["my drink is coffee", "noted, Bob", "thanks", "welcome"]
    assert s.last_consolidated == 2 and [m.content for m in s.unconsolidated] == ["thanks", "welcome"]
    assert not violations([{"role": "system", "content": "x"}, *(m.to_llm() for m in s.unconsolidated)])
    assert json.loads(text.splitlines()[0])["record"] == "meta"


def test_members_and_sections(tmp_path):
    """Members are known by id and names; their MEMORY.md section goes, another member's stays."""
    files = seed(tmp_path)
    alice = members(files)["7"]
    assert alice == Member("7", ("Alice",)) and alice.mentioned_in("then ALICE left") and not alice.mentioned_in("Alicex")
    memory = "## Alice\n\n- drink: tea\n\n## Bob\n\n- drink: coffee\n\n## The group\n\n- two people\n"
    assert drop_section(memory, alice) == "## Bob\n\n- drink: coffee\n\n## The group\n\n- two people\n"
    assert drop_section("## Alice (id 7)\n- x\n## Bob\n- y\n", Member("7", ("Alice",))) == "## Bob\n- y\n"


def test_history_parts_round_trip(tmp_path):
    """HISTORY.md splits into entries and writes back the same."""
    files = ChatFiles.locate(tmp_path, "telegram", "-1")
    memfiles.append_history(files, "first", when=0)
    memfiles.append_history(files, "second", when=60)
    before = files.history.read_text()
    preamble, entries = history_parts(files)
    assert preamble == "" and [e.split("\n\n", 1)[1] for e in entries] == ["first", "second"]
    from memory.erase import write_history
    write_history(files, preamble, entries)
    assert files.history.read_text() == before


CHILD = """
import sys
from memory import files as memfiles
from memory.erase import drop_turns
from memory.paths import ChatFiles
files = ChatFiles.locate(sys.argv[1], "telegram", "-1")
original = files.session.read_text()
print("ready", flush=True)
while True:
    memfiles.write_atomic(files.session, original)
    drop_turns(files, "7")
"""


def test_sigkill_during_the_rewrite_leaves_old_or_new(tmp_path):
    """A process killed at random moments while rewriting the session leaves the whole old or the whole new file."""
    files = seed(tmp_path / "data")
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
