"""Any sequence of provider replies, with crashes between saves, leaves sessions whose later requests are legal."""

import asyncio
import json
import os
import tempfile
from collections import deque

from hypothesis import HealthCheck, given, settings, strategies as st

from bot.config import load_settings
from tests.conftest import running
from tests.fakes.fake_llm import FakeLLM, Reply, overflow_body
from tests.legality import violations
from tests import kept


def tool_reply(cid, name, args, reasoning):
    call = {"type": "function", "function": {"name": name, "arguments": args}}
    if cid is not None:
        call["id"] = cid
    return Reply(message={"role": "assistant", "content": None, "tool_calls": [call],
                          **({"reasoning_content": reasoning} if reasoning else {})})


tool_replies = st.builds(
    tool_reply,
    st.sampled_from(["", "call_0", None, "toolu_01", "abcdefghi"]),
    st.sampled_from(["current_time", "functions.current_time", "", "bad name!", "remember", "nope"]),
    st.sampled_from(["{}", '{"timezone": "Asia/Tokyo"}', "{bad", '```json\n{"timezone": "UTC",}\n```',
                     {"timezone": "UTC"}, "", '{"fact": "likes tea"}']),
    st.sampled_from([None, "thinking about it"]),
)
replies = st.one_of(
    tool_replies,
    st.sampled_from([
        Reply(text="plain answer"),
        Reply(text="<think>hidden</think>shown"),
        Reply(text="cut here", finish_reason="length"),
        Reply(message={"role": "assistant", "content": [{"type": "text", "text": "from parts"}]}),
        Reply(choices=[]),
        Reply(status=500),
        Reply(text=None, finish_reason="content_filter"),
        overflow_body("vllm", 6000, 9000),
    ]),
)
crashes = st.sampled_from(["none", "torn", "garbage", "lost-last-line"])


def crash(path, how):
    """What a crash between or during saves can leave behind."""
    if how == "none" or not path.exists():
        return
    data = path.read_bytes()
    if how == "torn":
        path.write_bytes(data[: max(0, len(data) - 7)])
    elif how == "garbage":
        path.write_bytes(data + b'{"role": "assistant", "tool_calls": [{"id": 5}]\n\x00\xff not json\n')
    elif how == "lost-last-line":
        lines = data.splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))


async def scenario(turns):
    home = tempfile.mkdtemp(prefix="tusk-prop-")
    async with FakeLLM() as fake:
        queue: deque[Reply] = deque()
        fake.responder = lambda body: queue.popleft() if queue else Reply(text="ok")
        s = load_settings(TUSK_HOME=home, TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake.base_url,
                          TUSK_API_KEY="sk-test", TUSK_HTTP_PORT="0", TUSK_LLM_RETRIES="0",
                          TUSK_CONTEXT_WINDOW="8192", TUSK_SHUTDOWN_GRACE="2")
        async with running(s) as tusk:
            for i, (scripted, how) in enumerate(turns):
                queue.extend(scripted)
                await tusk.say("p", f"message {i}")
                queue.clear()
                session = kept.on_disk(tusk, "http", "p")
                await tusk.agent.aclose()  # post-turn hooks done before the file is damaged
                crash(session.files.session, how)
            await tusk.say("p", "final")
        for body in fake.requests:
            if not any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
                assert violations(body["messages"]) == [], json.dumps(body["messages"])[:3000]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.lists(replies, min_size=1, max_size=3), crashes), min_size=1, max_size=4))
def test_any_replies_and_crashes_leave_every_later_request_legal(turns, monkeypatch):
    """Provider replies of every shape, torn or lost lines between turns: every request stays legal."""
    for name in list(os.environ):
        if name.startswith(("TUSK_", "TELEGRAM_", "DISCORD_", "SLACK_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tempfile.mkdtemp(prefix="tusk-cwd-"))
    asyncio.run(scenario(turns))
