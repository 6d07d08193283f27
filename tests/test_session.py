"""JSONL sessions: append-only, crash-tolerant, cheap to keep warm."""

import json

import pytest

from memory.paths import ChatFiles
from memory.session import Message, NewerSchemaError, SessionStore, iter_messages, load


def _turn(store, session, n):
    store.append(session, [Message("user", f"q{n}"), Message("assistant", f"a{n}")])


def test_first_save_writes_meta_then_messages(tmp_path):
    """The file starts with a versioned metadata record; messages follow in chat format."""
    store = SessionStore(tmp_path)
    s = store.get("http", "alice")
    assert not s.files.session.exists()  # nothing written before the first save
    _turn(store, s, 1)
    lines = [json.loads(x) for x in s.files.session.read_text().splitlines()]
    assert lines[0]["record"] == "meta" and lines[0]["schema"] == 1 and lines[0]["chat_id"] == "alice"
    assert [(x["role"], x["content"]) for x in lines[1:]] == [("user", "q1"), ("assistant", "a1")]
    assert all("ts" in x for x in lines[1:])


def test_saving_appends_and_never_rewrites(tmp_path):
    """A save adds lines at the end; earlier bytes are untouched."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    _turn(store, s, 1)
    before = s.files.session.read_bytes()
    _turn(store, s, 2)
    after = s.files.session.read_bytes()
    assert after.startswith(before) and len(after) > len(before)


def test_pointer_is_appended_and_last_one_wins(tmp_path):
    """Moving the pointer appends a record; a fresh load keeps only messages past it."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    for n in range(3):
        _turn(store, s, n)
    store.set_pointer(s, 2)
    store.set_pointer(s, 4)
    assert [m.content for m in s.unconsolidated] == ["q2", "a2"]
    reloaded = load(s.files, "http", "a")
    assert (reloaded.total, reloaded.last_consolidated) == (6, 4)
    assert [m.content for m in reloaded.unconsolidated] == ["q2", "a2"]
    assert len(list(iter_messages(s.files))) == 6


def test_pointer_can_move_back(tmp_path):
    """Moving the pointer back brings the older messages into the conversation again."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    for n in range(2):
        _turn(store, s, n)
    store.set_pointer(s, 4)
    store.set_pointer(s, 2)
    assert [m.content for m in s.unconsolidated] == ["q1", "a1"]


def test_torn_last_line_loads_and_next_save_starts_a_new_line(tmp_path):
    """A crash mid-write leaves a torn line: it is skipped, the rest loads, later saves stay readable."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    _turn(store, s, 1)
    with open(s.files.session, "a") as fh:
        fh.write('{"role": "user", "content": "half')
    fresh = SessionStore(tmp_path)
    s2 = fresh.get("http", "a")
    assert [m.content for m in s2.unconsolidated] == ["q1", "a1"]
    _turn(fresh, s2, 2)
    assert [m.content for m in load(s2.files, "http", "a").unconsolidated] == ["q1", "a1", "q2", "a2"]


def test_garbage_lines_are_skipped_not_fatal(tmp_path, caplog):
    """Undecodable lines (bad JSON, bad roles, binary) are skipped with a warning; every good line loads."""
    files = ChatFiles.locate(tmp_path, "http", "a")
    files.dir.mkdir(parents=True)
    files.session.write_bytes(b'{"record":"meta","schema":1}\n{"role":"user","content":"one"}\nnot json\n'
                              b'\xff\xfe\n[1,2]\n{"role":"wizard","content":"x"}\n{"role":"assistant","content":"two"}\n'
                              b'{"record":"pointer","last_consolidated":"nope"}\n')
    s = load(files, "http", "a")
    assert [m.content for m in s.unconsolidated] == ["one", "two"]
    assert sum("skipping" in r.message for r in caplog.records) == 5


def test_newer_schema_is_refused_not_overwritten(tmp_path):
    """A file from a newer Tusk is left alone with a clear error."""
    files = ChatFiles.locate(tmp_path, "http", "a")
    files.dir.mkdir(parents=True)
    files.session.write_text('{"record":"meta","schema":99}\n')
    with pytest.raises(NewerSchemaError, match="newer Tusk"):
        load(files, "http", "a")


def test_warm_session_is_served_from_cache(tmp_path):
    """A second get of the same chat returns the cached session, not a reload."""
    store = SessionStore(tmp_path)
    assert store.get("http", "a") is store.get("http", "a")


def test_cache_is_bounded(tmp_path):
    """The store forgets the least recently used sessions beyond its size."""
    store = SessionStore(tmp_path, cache_size=2)
    first = store.get("http", "a")
    store.get("http", "b")
    store.get("http", "c")
    assert store.get("http", "a") is not first


def test_tool_calls_round_trip(tmp_path):
    """Assistant tool calls and tool results survive a save and a reload."""
    store = SessionStore(tmp_path)
    s = store.get("http", "a")
    call = {"id": "c1", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}
    store.append(s, [Message("user", "time?"), Message("assistant", None, tool_calls=(call,)),
                     Message("tool", "noon", tool_call_id="c1", name="current_time"), Message("assistant", "noon")])
    again = load(s.files, "http", "a").unconsolidated
    assert again[1].tool_calls == (call,) and again[2].tool_call_id == "c1"
    assert [m.to_llm() for m in again] == [m.to_llm() for m in s.unconsolidated]


def test_user_messages_keep_their_sender_and_it_never_reaches_the_model(tmp_path):
    """A user line stores its sender (id and name); the LLM form has no sender key; old lines load without one."""
    store = SessionStore(tmp_path)
    s = store.get("telegram", "-100")
    store.append(s, [Message("user", "I'm vegetarian", sender_id="42", sender_name="Alice"),
                     Message("assistant", "noted")])
    with open(s.files.session, "a") as fh:
        fh.write(json.dumps({"role": "user", "content": "old line", "ts": 1.0}) + "\n")
    lines = [json.loads(x) for x in s.files.session.read_text().splitlines()]
    assert lines[1]["sender"] == {"id": "42", "name": "Alice"} and "sender" not in lines[2]
    loaded = load(s.files, "telegram", "-100").unconsolidated
    assert (loaded[0].sender_id, loaded[0].sender_name) == ("42", "Alice")
    assert loaded[2].sender_id is None and "sender" not in loaded[0].to_llm()
