"""The OpenAI-compatible endpoint, driven by the official `openai` package and by litellm as clients."""

import asyncio
import base64
import io

import openai
import pytest
from PIL import Image

from tests.conftest import running
from tests.fakes.fake_llm import Reply, images_in
from tests import kept


def sync_client(tusk, **kw):
    return openai.OpenAI(base_url=f"{tusk.url}/v1", api_key=tusk.token, max_retries=0, **kw)


def async_client(tusk, chat=None):
    headers = {"X-Tusk-Chat": chat} if chat else None
    return openai.AsyncOpenAI(base_url=f"{tusk.url}/v1", api_key=tusk.token, max_retries=0, default_headers=headers)


def stored(tusk, chat):
    return [(m.role, m.content) for m in kept.on_disk(tusk, "http", chat).unconsolidated]


def memory_responder(body):
    """Saves what the user said to memory when consolidating; answers from the memory in the system prompt."""
    if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
        return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "Talked about tea.",
                                                                  "memory_update": "- drinks green tea"})])
    system = body["messages"][0]["content"]
    return Reply(text="You drink green tea." if "- drinks green tea" in system else "noted")


async def test_sync_client_in_a_thread_gets_the_answer_and_real_usage(tusk, fake_llm):
    """The sync `openai` client gets the model's answer, stored in chat http:<X-Tusk-Chat>, with token counts."""
    with sync_client(tusk, default_headers={"X-Tusk-Chat": "s"}) as client:
        resp = await asyncio.to_thread(client.chat.completions.create, model="openai/fake-model",
                                       messages=[{"role": "user", "content": "hello"}])
    assert resp.choices[0].message.content.endswith("\n\nhello")
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert stored(tusk, "s") == [("user", "hello"), ("assistant", resp.choices[0].message.content)]


async def test_without_the_header_one_chat_per_key_never_the_user_field(tusk, fake_llm):
    """No X-Tusk-Chat: the chat is openai-<hash of the key>, whatever `user` says."""
    async with async_client(tusk) as client:
        for user in ("alice", "bob"):
            await client.chat.completions.create(model="openai/fake-model", user=user,
                                                 messages=[{"role": "user", "content": f"hi from {user}"}])
    chats = [p.name for p in (tusk.settings.home / "chats" / "http").iterdir()]
    assert len(chats) == 1 and chats[0].startswith("openai-") and tusk.token not in chats[0]


async def test_resending_the_whole_history_stores_nothing_twice(tusk, fake_llm):
    """A client that resends the conversation each time: only the new user message and its answer are stored."""
    history = [{"role": "user", "content": "one"}]
    async with async_client(tusk, "r") as client:
        for text in ("two", "three"):
            resp = await client.chat.completions.create(model="openai/fake-model", messages=history)
            history += [{"role": "assistant", "content": resp.choices[0].message.content},
                        {"role": "user", "content": text}]
        await client.chat.completions.create(model="openai/fake-model", messages=history)
    kept = stored(tusk, "r")
    assert [t for r, t in kept if r == "user"] == ["one", "two", "three"] and len(kept) == 6


async def test_regenerate_answers_again_without_a_duplicate(tusk, fake_llm):
    """The last user message sent again without its answer: answered anew, that exchange left out of the
    prompt, and nothing stored."""
    async with async_client(tusk, "g") as client:
        first = [{"role": "user", "content": "pick a number"}]
        await client.chat.completions.create(model="openai/fake-model", messages=first)
        fake_llm.script(Reply(text="seven"))
        again = await client.chat.completions.create(model="openai/fake-model", messages=first)
    assert again.choices[0].message.content == "seven"
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"][1:]]
    assert len(sent) == 1 and sent[0].endswith("pick a number")
    assert [r for r, _ in stored(tusk, "g")] == ["user", "assistant"] and stored(tusk, "g")[1][1] != "seven"


async def test_the_same_message_twice_after_an_answer_is_a_new_turn(tusk, fake_llm):
    """"yes" after "yes" (the client keeps the answer between): a new message, not a regenerate."""
    async with async_client(tusk, "y") as client:
        first = await client.chat.completions.create(model="openai/fake-model",
                                                     messages=[{"role": "user", "content": "yes"}])
        await client.chat.completions.create(model="openai/fake-model", messages=[
            {"role": "user", "content": "yes"}, {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "yes"}])
    assert len(stored(tusk, "y")) == 4


async def test_client_system_message_is_for_that_request_only(tusk, fake_llm):
    """A client system message follows the owner's prompt, framed as the app's, and is never saved."""
    async with async_client(tusk, "sys") as client:
        await client.chat.completions.create(model="openai/fake-model", messages=[
            {"role": "system", "content": "Answer like a pirate."}, {"role": "user", "content": "hi"}])
    system = fake_llm.requests[-1]["messages"][0]["content"]
    assert system.index("You are") < system.index("The client app's instructions") < system.index("like a pirate")
    assert all("pirate" not in (t or "") for _, t in stored(tusk, "sys"))


async def test_streaming_with_usage_chunk(tusk, fake_llm):
    """`stream: true` gives chat.completion.chunk pieces that add up to the answer, then a usage chunk."""
    fake_llm.script(Reply(text="a streamed answer that is long enough to be shown while it is written " * 3,
                          token_delay=0.005))
    async with async_client(tusk, "st") as client:
        stream = await client.chat.completions.create(
            model="openai/fake-model", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "go"}])
        chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == stored(tusk, "st")[-1][1]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert chunks[-2].choices[0].finish_reason == "stop"


async def test_litellm_as_a_client(tusk, fake_llm):
    """litellm, pointed at Tusk as an OpenAI server, gets the answer."""
    import litellm

    resp = await litellm.acompletion(model="openai/openai/fake-model", api_base=f"{tusk.url}/v1",
                                     api_key=tusk.token, messages=[{"role": "user", "content": "via litellm"}],
                                     extra_headers={"X-Tusk-Chat": "ll"})
    assert resp.choices[0].message.content.endswith("via litellm") and resp.usage.prompt_tokens > 0


async def test_models_lists_the_owner_models(make_settings, fake_llm):
    """GET /v1/models lists TUSK_MODEL and the TUSK_MODELS labels; a label picks its model for that request."""
    async with running(make_settings(TUSK_MODELS="small=openai/small-model")) as tusk:
        async with async_client(tusk, "m") as client:
            ids = [m.id async for m in client.models.list()]
            await client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}])
    assert ids == ["openai/fake-model", "small"] and fake_llm.requests[-1]["model"] == "small-model"


@pytest.mark.parametrize("extra,field", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
    ({"n": 2}, "n"), ({"logprobs": True}, "logprobs")])
async def test_unsupported_fields_are_a_400_naming_them(tusk, fake_llm, extra, field):
    """Client tools, n > 1 and logprobs: BadRequestError naming the field; the model is never asked."""
    async with async_client(tusk, "u") as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="openai/fake-model",
                                                 messages=[{"role": "user", "content": "hi"}], **extra)
    assert caught.value.body["param"] == field and f"'{field}'" in caught.value.message
    assert fake_llm.requests == []


async def test_unknown_model_is_404_and_bad_key_is_401(tusk, fake_llm):
    """An unknown model: NotFoundError; a wrong key: AuthenticationError, both in OpenAI's error body."""
    async with async_client(tusk, "e") as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.code == "model_not_found"
    async with openai.AsyncOpenAI(base_url=f"{tusk.url}/v1", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as caught:
            await bad.chat.completions.create(model="openai/fake-model", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["type"] == "authentication_error"


async def test_spend_limit_is_429_and_unavailable_model_is_503(make_settings, fake_llm):
    """A spend limit that refuses the turn: RateLimitError; a model that cannot be reached: 503."""
    async with running(make_settings(TUSK_CHAT_LIMIT_DAILY_TOKENS="1")) as tusk:
        async with async_client(tusk, "l") as client:
            with pytest.raises(openai.RateLimitError):
                await client.chat.completions.create(model="openai/fake-model",
                                                     messages=[{"role": "user", "content": "b"}])
    async with running(make_settings()) as tusk:
        fake_llm.script(Reply(status=503))
        async with async_client(tusk, "d") as client:
            with pytest.raises(openai.InternalServerError) as caught:
                await client.chat.completions.create(model="openai/fake-model",
                                                     messages=[{"role": "user", "content": "a"}])
    assert caught.value.status_code == 503


async def test_a_conversation_with_memory_across_consolidation(tusk, fake_llm):
    """A fact told in one request is used in a later one after the chat was consolidated (/new)."""
    fake_llm.responder = memory_responder
    async with async_client(tusk, "mem") as client:
        await client.chat.completions.create(model="openai/fake-model",
                                             messages=[{"role": "user", "content": "I only drink green tea"}])
        await client.chat.completions.create(model="openai/fake-model", messages=[{"role": "user", "content": "/new"}])
        resp = await client.chat.completions.create(model="openai/fake-model",
                                                    messages=[{"role": "user", "content": "what do I drink?"}])
    assert resp.choices[0].message.content == "You drink green tea."


async def test_image_parts_reach_the_model(make_settings, fake_llm):
    """An image_url data URI is kept as the chat's media and sent to the model as an image part."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    async with running(make_settings(TUSK_VISION="true")) as tusk, async_client(tusk, "img") as client:
        await client.chat.completions.create(model="openai/fake-model", messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": url}}]}])
    assert len(images_in(fake_llm.requests[-1])) == 1


async def test_api_keys_reach_only_their_prefix_and_die_when_revoked(tusk, fake_llm):
    """`tusk apikey create --prefix fam-`: the key talks to chats fam-..., is refused elsewhere (403) and on the
    native API (401), and is refused once revoked; only its hash is on disk (0600)."""
    from bot.access.api_keys import ApiKeys

    keys = ApiKeys(tusk.settings.home)
    key, secret = keys.create("fam-")
    path = tusk.settings.home / "api-keys.json"
    assert secret not in path.read_text() and path.stat().st_mode & 0o777 == 0o600
    async with openai.AsyncOpenAI(base_url=f"{tusk.url}/v1", api_key=secret, max_retries=0) as client:
        await client.chat.completions.create(model="openai/fake-model", messages=[{"role": "user", "content": "hi"}],
                                             extra_headers={"X-Tusk-Chat": "fam-anna"})
        await client.chat.completions.create(model="openai/fake-model", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.PermissionDeniedError):
            await client.chat.completions.create(model="openai/fake-model", extra_headers={"X-Tusk-Chat": "owner"},
                                                 messages=[{"role": "user", "content": "hi"}])
        async with tusk.client.get(f"{tusk.url}/api/chats", headers={"Authorization": f"Bearer {secret}"}) as resp:
            assert resp.status == 401
        keys.revoke(key.id)
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="openai/fake-model",
                                                 messages=[{"role": "user", "content": "hi"}])
    chats = sorted(p.name for p in (tusk.settings.home / "chats" / "http").iterdir())
    assert chats[0] == "fam-anna" and chats[1].startswith("fam-openai-") and len(chats) == 2


async def test_temperature_and_max_tokens_reach_the_model_for_that_request(tusk, fake_llm):
    """A client's temperature is sent as given and its max_tokens within the reply reserve; the next request
    without them sends neither the temperature nor the client's bound."""
    async with async_client(tusk, "sampling") as client:
        await client.chat.completions.create(model="openai/fake-model", temperature=0.2, max_tokens=50,
                                             messages=[{"role": "user", "content": "hi"}])
        await client.chat.completions.create(model="openai/fake-model", messages=[
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"},
            {"role": "user", "content": "again"}])
    first, second = fake_llm.requests[-2:]
    assert first["temperature"] == 0.2 and first["max_tokens"] == 50
    assert "temperature" not in second and second["max_tokens"] != 50


async def test_completion_ids_stay_unique_across_a_restart(fake_llm, tmp_path):
    """`tusk run` twice on one data dir, two completions (one streamed) each: four different ids, in OpenAI's
    `chatcmpl-` form; a restart does not start them again."""
    import signal

    from tests import procs
    from tests.test_cli import api_from, env_for

    ids = []
    for run in range(2):
        proc = await procs.start_tusk("run", env=env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0"),
                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        url, headers = api_from((await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode(),
                                tmp_path / "data")
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=headers["Authorization"][7:], max_retries=0,
                                    timeout=procs.FIRST_TURN)
        async with client:
            whole = await client.chat.completions.create(model="openai/fake-model",
                                                         messages=[{"role": "user", "content": f"run {run}"}])
            stream = await client.chat.completions.create(model="openai/fake-model", stream=True,
                                                          messages=[{"role": "user", "content": f"again {run}"}])
            ids += [whole.id, *{chunk.id async for chunk in stream}]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    assert len(ids) == 4 and len(set(ids)) == 4 and all(i.startswith("chatcmpl-") for i in ids), ids
