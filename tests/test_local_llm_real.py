"""Against a real llama.cpp server (../shared/tools/local-llm/serve), when one is running on this machine.

Not part of the default run's requirements: each test skips, saying why, when its server does not answer.
Start them with `serve --port 18790 --ctx 2048` and `serve --port 18792 --ramble` (the first start builds
llama.cpp, ~8 minutes); bench/local_llm.py starts them itself.
"""

import urllib.request

import pytest

from memory import files as memfiles
from tests.conftest import running

PLAIN, RAMBLE = "http://127.0.0.1:18790/v1", "http://127.0.0.1:18792/v1"
TEXT = ("Let me tell you about my garden: the tomatoes split after the rain, the beans climb the fence, and I "
        "want to plant garlic in October. Please remember the important parts for later. ")


def server(base: str) -> str:
    try:
        with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
            if resp.status == 200:
                return base
    except OSError:
        pass
    pytest.skip(f"no local llama.cpp server at {base} (start ../shared/tools/local-llm/serve)")


async def test_a_long_chat_works_with_only_model_and_base_url(make_settings):
    """Nothing configured but the model and base URL: every turn answered, the window learned from the server,
    memory written by the model, no reply longer than the reserve."""
    base = server(PLAIN)
    async with running(make_settings(TUSK_MODEL="openai/tiny", TUSK_API_BASE=base, TUSK_LLM_TIMEOUT=120)) as tusk:
        for i in range(30):
            (reply,) = await tusk.say("real", f"{i}. {TEXT}")
            assert "Small local model here" in reply, reply
        await tusk.agent.aclose()
        files = tusk.store.get("http", "real").files
        for stats in tusk.consolidator.stats.values():  # a failed round backs off for 30 s: let that time pass
            stats.retry_at = 0
        for i in range(3):
            await tusk.say("real", f"later {i}. {TEXT}")
        await tusk.agent.aclose()
        assert tusk.consolidator.budget.window == 2048 and "learned" in tusk.consolidator.budget.source
        entries = memfiles.history_entries(files)
        assert entries and not all("\n[raw] " in e for e in entries)
        assert "noted your words" in memfiles.read_memory(files)


async def test_a_model_that_never_stops_is_cut_at_the_reserve(make_settings):
    """The rambling model: each reply ends at the reply reserve, says it was cut, and the next turn still fits."""
    base = server(RAMBLE)
    settings = make_settings(TUSK_MODEL="openai/tiny", TUSK_API_BASE=base, TUSK_CONTEXT_WINDOW=2048,
                             TUSK_LLM_TIMEOUT=300)
    async with running(settings) as tusk:
        for i in range(3):
            (reply,) = await tusk.say("ramble", f"{i}. hello")
            assert "cut off here" in reply
        saved = [m for m in tusk.store.get("http", "ramble").unconsolidated if m.role == "assistant"]
        assert all(m.tokens <= tusk.consolidator.budget.reserve + 40 for m in saved)
