"""When the model fails, the user hears one clear sentence and the session is left as it was."""

import logging
import sys

import pytest

from bot.errors import LLMError
from bot.llm import LLM
from tests.fakes.fake_llm import Reply
from tests import kept


@pytest.fixture
async def closing():
    """LLMs a test makes, closed when it ends (they may hold pooled connections)."""
    made = []
    yield made
    for llm in made:
        await llm.aclose()

UNAVAILABLE = LLMError.user_message


@pytest.mark.parametrize("reply", [Reply(status=500), Reply(status=429, headers={"Retry-After": "0"}),
                                   Reply(status=503), Reply(raw_body="not json")])
async def test_failure_gives_clear_message_and_leaves_session(tusk, fake_llm, reply):
    """5xx, 429, unreadable replies: a short apology, and session.jsonl is byte-for-byte unchanged."""
    await tusk.say("f", "first")
    path = kept.files(tusk, "http", "f").session
    before = path.read_bytes()
    fake_llm.script(reply)
    assert await tusk.say("f", "second") == [LLMError("").owner_message]  # the console hears the doctor hint too
    assert path.read_bytes() == before
    assert [m.content for m in kept.on_disk(tusk, "http", "f").unconsolidated] == ["first", f"echo: {fake_llm.requests[0]['messages'][-1]['content']}"]


async def test_timeout_gives_clear_message(make_settings, fake_llm, closing):
    """A model slower than TUSK_LLM_TIMEOUT counts as unavailable."""
    fake_llm.script(Reply(text="late", delay=3))
    llm = LLM(make_settings(TUSK_LLM_TIMEOUT=0.5).llm_settings())
    closing.append(llm)
    with pytest.raises(LLMError) as info:
        await llm.complete([{"role": "user", "content": "hi"}])
    assert info.value.user_message == UNAVAILABLE


async def test_transient_errors_are_retried(make_settings, fake_llm, closing):
    """A 429 then a 500 are retried with backoff, and the third attempt's reply comes through."""
    fake_llm.script(Reply(status=429, headers={"Retry-After": "0.05"}), Reply(status=500), Reply(text="finally"))
    llm = LLM(make_settings(TUSK_LLM_RETRIES=2).llm_settings())
    closing.append(llm)
    reply = await llm.complete([{"role": "user", "content": "hi"}])
    assert reply.content == "finally" and len(fake_llm.requests) == 3


async def test_rejections_are_not_retried(make_settings, fake_llm, closing):
    """A 400 or 401 is the request's fault: no retry, a different message."""
    fake_llm.script(Reply(status=401))
    llm = LLM(make_settings(TUSK_LLM_RETRIES=3).llm_settings())
    closing.append(llm)
    with pytest.raises(LLMError) as info:
        await llm.complete([{"role": "user", "content": "hi"}])
    assert len(fake_llm.requests) == 1 and info.value.user_message != UNAVAILABLE


async def test_fallback_model_takes_over(make_settings, fake_llm, closing):
    """When the main model is down, TUSK_FALLBACK_MODELS are tried in order."""
    fake_llm.script(Reply(status=500), Reply(text="from fallback"))
    llm = LLM(make_settings(TUSK_FALLBACK_MODELS="openai/backup-model").llm_settings())
    closing.append(llm)
    reply = await llm.complete([{"role": "user", "content": "hi"}])
    assert reply.content == "from fallback"
    assert [r["model"] for r in fake_llm.requests] == ["fake-model", "backup-model"]


async def test_api_key_never_logged(tusk, fake_llm, caplog):
    """The API key does not appear in any log record, even on failure."""
    fake_llm.script(Reply(status=500))
    await tusk.say("k", "hi")
    assert caplog.records
    plain = logging.Formatter("%(message)s")
    assert all("sk-test-secret-key" not in plain.format(r) for r in caplog.records)


def test_masking_formatter_hides_secrets_in_tracebacks():
    """Should a secret reach a log call, the configured formatter masks it, traceback included."""
    from bot.logs import MaskingFormatter

    try:
        raise RuntimeError("auth failed for sk-test-secret-key")
    except RuntimeError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "key %s", ("sk-test-secret-key",), sys.exc_info())
    text = MaskingFormatter("%(message)s", ["sk-test-secret-key"]).format(record)
    assert "sk-test-secret-key" not in text and "***" in text and "RuntimeError" in text


async def test_retry_after_is_honoured(make_settings, fake_llm, closing):
    """A 429 with Retry-After waits that long before the next attempt, not the shorter backoff."""
    import time

    fake_llm.script(Reply(status=429, headers={"Retry-After": "0.6"}), Reply(text="ok"))
    llm = LLM(make_settings(TUSK_LLM_RETRIES=1, TUSK_LLM_BACKOFF=0.01).llm_settings())
    closing.append(llm)
    start = time.monotonic()
    await llm.complete([{"role": "user", "content": "hi"}])
    assert time.monotonic() - start >= 0.6
