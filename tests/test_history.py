"""Whatever a session holds, the history sent to the LLM is a legal conversation."""

import json

from hypothesis import given, settings, strategies as st

from memory.history import legal_history
from memory.session import Message
from tests.legality import violations


def call(cid, name="f"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def convo(msgs):
    return [{"role": "system", "content": "s"}, *(m.to_llm() for m in legal_history(msgs))]


def test_clean_history_is_kept_as_is():
    """A well-formed conversation passes through unchanged."""
    msgs = [Message("user", "hi"), Message("assistant", None, tool_calls=(call("aaaaaaaaa"),)),
            Message("tool", "r", tool_call_id="aaaaaaaaa"), Message("assistant", "done")]
    assert legal_history(msgs) == msgs


def test_partial_tool_results_keep_only_answered_calls():
    """An assistant with calls [A, B] but only A's result keeps A and drops B."""
    msgs = [Message("user", "hi"), Message("assistant", None, tool_calls=(call("AAAAAAAAA"), call("BBBBBBBBB"))),
            Message("tool", "ra", tool_call_id="AAAAAAAAA"), Message("assistant", "done")]
    out = legal_history(msgs)
    assert [c["id"] for c in out[1].tool_calls] == ["AAAAAAAAA"] and not violations(convo(msgs))


def test_leading_assistant_and_orphans_are_dropped():
    """History starts at the first user message; results without a call vanish."""
    msgs = [Message("assistant", "stale"), Message("tool", "x", tool_call_id="zz"), Message("user", "hi"),
            Message("tool", "y", tool_call_id="q"), Message("assistant", "hello")]
    assert [(m.role, m.content) for m in legal_history(msgs)] == [("user", "hi"), ("assistant", "hello")]


def test_runs_of_one_role_are_merged():
    """Two user messages in a row (a turn whose reply was lost) become one."""
    msgs = [Message("user", "a"), Message("user", "b"), Message("assistant", "x"), Message("assistant", "y")]
    assert [(m.role, m.content) for m in legal_history(msgs)] == [("user", "a\n\nb"), ("assistant", "x\n\ny")]


ids = st.sampled_from(["a", "b", "c", "d"])
messages = st.one_of(
    st.builds(Message, st.just("user"), st.one_of(st.none(), st.text(max_size=5))),
    st.builds(Message, st.just("assistant"), st.one_of(st.none(), st.text(max_size=5)),
              st.lists(ids, max_size=3).map(lambda xs: tuple(call(x) for x in xs))),
    st.builds(Message, st.just("tool"), st.text(max_size=5), tool_call_id=st.one_of(st.none(), ids)),
    st.builds(Message, st.just("system"), st.text(max_size=5)),
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(messages, max_size=25))
def test_any_sequence_becomes_legal_and_invents_nothing(msgs):
    """Random roles, ids, duplicates and truncations: the output meets every rule and adds no text."""
    out = convo(msgs)
    assert violations(out) == []
    source = "\n\n".join(m.content or "" for m in msgs)
    for m in out[1:]:
        for piece in (m["content"] or "").split("\n\n"):
            assert piece in source


hostile_ids = st.sampled_from(["", "call_0", "call_0", "toolu_01", "a" * 9, "x y", None])
hostile_calls = st.fixed_dictionaries({
    "id": hostile_ids,
    "type": st.sampled_from(["function", "", None]),
    "function": st.fixed_dictionaries({
        "name": st.sampled_from(["search_history", "functions.remember", "bad name!", "", None, "x" * 80,
                                 "current_time<|channel|>commentary"]),
        "arguments": st.sampled_from(['{"q": 1}', "", None, "{not json", '```json\n{"a": 1,}\n```',
                                      '{"t": "a\tb"}'.replace("\\t", "\t"), '"{\\"a\\": 2}"', "[1, 2]"])
                     | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    }),
})
hostile = st.one_of(
    st.builds(Message, st.just("user"), st.text(min_size=1, max_size=5)),
    st.builds(Message, st.just("assistant"), st.one_of(st.none(), st.text(max_size=5)),
              st.lists(hostile_calls, max_size=3).map(tuple)),
    st.builds(Message, st.just("tool"), st.text(max_size=5), tool_call_id=st.one_of(st.none(), hostile_ids)),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(hostile, max_size=20))
def test_any_stored_tool_calls_become_well_formed(msgs):
    """Empty, reused and odd ids, bad names, dict or broken arguments: the request is legal and well formed,
    and reloading the same lines yields the same request (ids are stable)."""
    out = convo(msgs)
    assert violations(out) == []
    reloaded = [Message.from_record(json.loads(json.dumps(m.to_record()))) for m in msgs]
    assert convo(reloaded) == out


def test_repairs_keep_the_call_and_its_result():
    """A call with no id, a prefixed name and an object for arguments is repaired, not dropped."""
    msgs = [Message("user", "hi"),
            Message("assistant", None, tool_calls=({"function": {"name": "functions.f", "arguments": {"a": 1}}},)),
            Message("tool", "result", tool_call_id=None), Message("assistant", "done")]
    out = convo(msgs)
    assert violations(out) == [] and out[2]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert out[3]["content"] == "result" and out[3]["tool_call_id"] == out[2]["tool_calls"][0]["id"]


def test_a_call_without_a_usable_name_goes_with_its_result():
    """No usable name: the call and its result are dropped, the rest of the turn stays."""
    msgs = [Message("user", "hi"),
            Message("assistant", "let me look", tool_calls=(call("aaaaaaaaa", name=""), call("bbbbbbbbb"))),
            Message("tool", "lost", tool_call_id="aaaaaaaaa"), Message("tool", "kept", tool_call_id="bbbbbbbbb"),
            Message("assistant", "done")]
    out = convo(msgs)
    assert violations(out) == [] and [c["id"] for c in out[2]["tool_calls"]] == ["bbbbbbbbb"]
    assert "lost" not in json.dumps(out)
