"""Whatever a session holds, the history sent to the LLM is a legal conversation."""

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
    msgs = [Message("user", "hi"), Message("assistant", None, tool_calls=(call("a"),)),
            Message("tool", "r", tool_call_id="a"), Message("assistant", "done")]
    assert legal_history(msgs) == msgs


def test_partial_tool_results_keep_only_answered_calls():
    """An assistant with calls [A, B] but only A's result keeps A and drops B."""
    msgs = [Message("user", "hi"), Message("assistant", None, tool_calls=(call("A"), call("B"))),
            Message("tool", "ra", tool_call_id="A"), Message("assistant", "done")]
    out = legal_history(msgs)
    assert [c["id"] for c in out[1].tool_calls] == ["A"] and not violations(convo(msgs))


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


@settings(max_examples=3000, deadline=None)
@given(st.lists(messages, max_size=25))
def test_any_sequence_becomes_legal_and_invents_nothing(msgs):
    """Random roles, ids, duplicates and truncations: the output meets every rule and adds no text."""
    out = convo(msgs)
    assert violations(out) == []
    source = "\n\n".join(m.content or "" for m in msgs)
    for m in out[1:]:
        for piece in (m["content"] or "").split("\n\n"):
            assert piece in source
