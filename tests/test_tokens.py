"""Token estimates work offline and are counted once per message."""

import json
import sys

from memory import tokens
from memory.session import Message, SessionStore, load

from tests import procs


def test_tokenizer_loads_offline_in_a_fresh_process(tmp_path):
    """A new process with no cache finds the encoding bundled in the litellm wheel (there is no network here)."""
    code = "from memory.tokens import count_text; print(count_text('hello world'))"
    env = procs.clean_env(home=tmp_path, PATH="/usr/bin:/bin")
    out = procs.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


def test_message_count_includes_tool_calls():
    """Tool calls and ids add to a message's estimate, on top of a fixed per-message overhead."""
    call = {"id": "c1", "type": "function", "function": {"name": "current_time", "arguments": '{"timezone":"UTC"}'}}
    plain = tokens.count_message({"role": "assistant", "content": "hi"})
    with_call = tokens.count_message({"role": "assistant", "content": "hi", "tool_calls": [call]})
    assert plain == tokens.MESSAGE_OVERHEAD + 1 and with_call > plain + 10


def test_counts_are_saved_and_reused(tmp_path):
    """Saved lines carry their count; loading reads it rather than re-encoding."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    store.append(s, [Message("user", "one two three"), Message("assistant", "four")])
    lines = [json.loads(x) for x in s.files.session.read_text().splitlines()[1:]]
    assert [x["tokens"] for x in lines] == [tokens.MESSAGE_OVERHEAD + 3, tokens.MESSAGE_OVERHEAD + 1]
    lines[0]["tokens"] = 999  # a stored count is trusted, so it must survive the reload unchanged
    s.files.session.write_text(s.files.session.read_text().splitlines()[0] + "\n"
                               + "".join(json.dumps(x) + "\n" for x in lines))
    again = load(s.files, "http", "a")
    assert again.tokens == 999 + tokens.MESSAGE_OVERHEAD + 1


def test_older_lines_without_counts_are_counted_on_load(tmp_path):
    """Files written before counts existed get them on load."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    s.files.dir.mkdir(parents=True)
    s.files.session.write_text('{"role":"user","content":"one two three"}\n')
    assert load(s.files, "http", "a").tokens == tokens.MESSAGE_OVERHEAD + 3
