"""Against real llama.cpp servers (../shared/tools/local-llm/serve): what no fake can tell.

`.ci/local-llm start` starts the servers these tests need (the first start builds llama.cpp into a cache,
~8 minutes; later starts take a second). A developer without them sees each test skip, saying why;
under `CI=true` a server that does not answer fails the test instead, so CI cannot go green while the
behaviour these tests guard is broken.

The servers (ports in `.ci/local-llm`): four plain ones at a 2,048-token window, one per long chat and
one for tests/test_direct.py's comparison, so no test's stream is cut short by another test's request on a
one-slot server, and one model that never stops talking.

The tests assert what must hold on any machine, however busy: every turn answered, the window learned,
MEMORY.md written. How fast replies come is measured by bench/local_llm.py (reply p50 / p95), never here.
"""

import os
import urllib.request

import pytest

from bot.app import TuskApp
from memory import files as memfiles
from tests.conftest import running
from tests.fakes.fake_telegram import FakeTelegram
from tests import kept

PLAIN, SSE, TELEGRAM, DIRECT, RAMBLE = (f"http://127.0.0.1:{port}/v1" for port in (18790, 18793, 18794, 18795, 18792))
TURNS = 40
REPLY_DEADLINE = 600  # seconds: how long a turn may wait before the test gives up (a hang, not a speed limit)
TOPICS = ["my vegetable garden and the tomatoes that split after the rain", "the trip to Lisbon we plan for May",
          "my sister's new job at the hospital in Porto", "the bread recipe with rye and caraway I keep changing",
          "why the old bicycle squeaks on every hill", "the book club reading a long Russian novel this month"]


def message(i: int) -> str:
    """A substantial message (~90 words), as people write when they want something remembered."""
    topic = TOPICS[i % len(TOPICS)]
    return (f"Turn {i}: let me tell you about {topic}. It has been on my mind all week, and I keep coming back "
            f"to the same questions about it: what to do first, what it will cost, and who could help. "
            f"Yesterday I wrote down a few notes about {topic} so I would not forget them, and I would like "
            f"you to remember the important parts for later.")


def server(base: str) -> str:
    try:
        with urllib.request.urlopen(f"{base}/models", timeout=60) as resp:  # a busy one-slot server answers late
            if resp.status == 200:
                return base
    except OSError:
        pass
    why = f"no local llama.cpp server at {base} (start them with .ci/local-llm start)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def untold(make_settings, base: str, **env):
    """Nothing configured but the model and the base URL (and the test's own home and port)."""
    return make_settings(TUSK_MODEL="openai/tiny", TUSK_API_BASE=base, TUSK_API_KEY="sk-local",
                         TUSK_LLM_TIMEOUT=REPLY_DEADLINE, **env)


async def settled_memory(tusk, channel: str, chat: str) -> memfiles.ChatFiles:
    """The chat's files once the background consolidation after the last reply is done."""
    await tusk.agent.aclose()
    return kept.files(tusk, channel, chat)


def assert_remembered(tusk, files):
    """The window was learned from the server and MEMORY.md was written through its forced tool call."""
    budget = tusk.consolidator.budget
    assert budget.window == 2048 and "learned" in budget.source, budget
    entries = [e for e in memfiles.history_entries(files) if "\n[raw] " not in e]
    memory = memfiles.read_memory(files)
    # Consolidation asks for temperature 0: sampling within its tool grammar, the server scattered the model's
    # one sentence over the fields (a memory of ",", an empty entry) and some rounds failed.
    assert entries and "noted your words" in memory, (entries, memory)


async def long_chat(say) -> None:
    """TURNS substantial messages to the chat `real`, each answered by the model."""
    for i in range(TURNS):
        (reply,) = await say("real", message(i))
        assert "Small local model here" in reply, (i, reply)


async def test_a_long_chat_over_the_http_api(make_settings):
    """40 substantial turns over the HTTP API without `stream`: every turn answered, the window learned,
    memory written by the model."""
    async with running(untold(make_settings, server(PLAIN))) as tusk:
        await long_chat(tusk.say)
        assert_remembered(tusk, await settled_memory(tusk, "http", "real"))


async def test_a_long_streamed_chat_over_the_http_api(make_settings):
    """The same chat with `stream: true`: the server fails inside the stream when the prompt is over its
    window; asked again whole, it says so, and every turn is answered. Streaming stays on."""
    async with running(untold(make_settings, server(SSE))) as tusk:
        await long_chat(tusk.say_streamed)
        assert_remembered(tusk, await settled_memory(tusk, "http", "real"))
        assert tusk.llm.no_stream == {}


async def test_a_long_chat_on_telegram_with_drafts(make_settings):
    """The same chat through Telegram, where a private chat shows replies as drafts: every turn answered."""
    base = server(TELEGRAM)
    async with FakeTelegram(token="123:ABC", username="tusk_bot") as tg:
        app = TuskApp(untold(make_settings, base, TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url,
                             TUSK_RATE_SENDER_PER_MINUTE=0, TUSK_RATE_CHAT_PER_MINUTE=0))  # 40 turns in a minute
        app.add_http()
        app.add_platforms()
        async with app:
            for i in range(TURNS):
                before = len([m for m in tg.sent if m["method"] == "sendMessage"])
                tg.push_message(42, message(i))
                await tg.wait_for(lambda: len([m for m in tg.sent if m["method"] == "sendMessage"]) > before,
                                  timeout=REPLY_DEADLINE)
                reply = [m for m in tg.sent if m["method"] == "sendMessage"][-1]["plain"]
                assert "Small local model here" in reply, (i, reply)
            assert_remembered(app, await settled_memory(app, "telegram", "42"))
            assert app.llm.no_stream == {}


async def test_a_model_that_never_stops_is_cut_at_the_reserve(make_settings):
    """The rambling model: each reply ends at the reply reserve, says it was cut, and the next turn still fits."""
    settings = make_settings(TUSK_MODEL="openai/tiny", TUSK_API_BASE=server(RAMBLE), TUSK_CONTEXT_WINDOW=2048,
                             TUSK_LLM_TIMEOUT=REPLY_DEADLINE)
    async with running(settings) as tusk:
        for i in range(2):  # the second turn shows a cut reply leaves the next one room
            (reply,) = await tusk.say("ramble", f"{i}. hello")
            assert "cut off here" in reply
        saved = [m for m in kept.on_disk(tusk, "http", "ramble").unconsolidated if m.role == "assistant"]
        assert all(m.tokens <= tusk.consolidator.budget.reserve + 40 for m in saved)
