"""The fake Discord itself, spoken to with plain aiohttp: what discord.py relies on is there."""

import base64
import json

import aiohttp
import pytest

from bot.speech.encode import encode
from tests.fakes.discord_payloads import IS_VOICE_MESSAGE, MESSAGE_CONTENT
from tests.fakes.fake_discord import FakeDiscord, guild_on, shown
from tests.fakes.fake_speech import audio_file


@pytest.fixture
async def dc():
    async with FakeDiscord(token="tok") as fake, aiohttp.ClientSession() as client:
        fake.client = client
        yield fake


async def test_rest_answers_exactly_application_json(dc):
    """REST replies carry `Content-Type: application/json` with no charset (discord.py parses nothing else)."""
    async with dc.client.get(f"{dc.api_base}/users/@me", headers={"Authorization": "Bot tok"}) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
        assert (await resp.json())["id"] == dc.bot["id"]


async def test_rest_needs_the_bot_token(dc):
    """A request without the right `Authorization: Bot <token>` is refused with 401, as Discord does."""
    async with dc.client.get(f"{dc.api_base}/users/@me", headers={"Authorization": "Bot nope"}) as resp:
        assert resp.status == 401
    assert dc.requests == [("GET", "/api/v10/users/@me")]


async def test_fail_next_refuses_one_matching_request(dc):
    """`fail_next` refuses the next matching request only."""
    dc.fail_next("POST", "/typing", status=403)
    url, auth = f"{dc.api_base}/channels/5/typing", {"Authorization": "Bot tok"}
    async with dc.client.post(url, headers=auth) as first, dc.client.post(url, headers=auth) as second:
        assert (first.status, second.status) == (403, 204)
    assert dc.typing == ["5"]


async def test_gateway_says_hello_then_ready_and_guilds(dc):
    """The gateway sends HELLO, answers heartbeats, and after IDENTIFY sends READY then each GUILD_CREATE."""
    guild = dc.add_guild()
    guild.add_channel()
    async with dc.client.ws_connect(f"{dc.gateway_url}?v=10&encoding=json&compress=zlib-stream") as ws:
        assert (await ws.receive_json())["op"] == 10
        await ws.send_str(json.dumps({"op": 1, "d": None}))
        assert (await ws.receive_json())["op"] == 11
        await ws.send_str(json.dumps({"op": 2, "d": {"token": "tok", "intents": 1}}))
        ready, created = await ws.receive_json(), await ws.receive_json()
        assert ready["t"] == "READY" and ready["d"]["guilds"] == [{"id": guild.id, "unavailable": True}]
        assert created["t"] == "GUILD_CREATE" and created["d"]["channels"][0]["guild_id"] == guild.id
        await dc.wait_connected()
        await dc.message("7", dc.add_user("alice"), "hi")
        event = await ws.receive_json()
        assert event["t"] == "MESSAGE_CREATE" and event["s"] == created["s"] + 1
    assert dc.identify == {"token": "tok", "intents": 1}


async def test_gateway_closes_on_a_wrong_token(dc):
    """IDENTIFY with another token closes the socket with 4004, which discord.py reports as a login failure."""
    async with dc.client.ws_connect(dc.gateway_url) as ws:
        await ws.receive_json()
        await ws.send_str(json.dumps({"op": 2, "d": {"token": "bad", "intents": 1}}))
        await ws.receive()
        assert ws.close_code == 4004


async def test_components_nonces_and_interaction_callbacks_as_discord(dc):
    """Bad components are refused; a repeated enforced nonce answers the message already made; an edit without
    components keeps them; an interaction takes one callback, of a type its kind allows."""
    auth = {"Authorization": "Bot tok"}
    url = f"{dc.api_base}/channels/5/messages"
    bad = {"content": "x", "components": [{"type": 1, "components": [{"type": 2, "style": 2, "label": "Stop"}]}]}
    async with dc.client.post(url, json=bad, headers=auth) as resp:
        assert resp.status == 400 and (await resp.json())["code"] == 50035
    button = {"type": 1, "components": [{"type": 2, "style": 2, "label": "Stop", "custom_id": "tusk:stop"}]}
    body = {"content": "hi", "components": [button], "nonce": "77", "enforce_nonce": True}
    async with dc.client.post(url, json=body, headers=auth) as one, dc.client.post(url, json=body, headers=auth) as two:
        first, again = await one.json(), await two.json()
    assert first["id"] == again["id"] and len(dc.sent) == 1
    async with dc.client.patch(f"{url}/{first['id']}", json={"content": "edited"}, headers=auth) as resp:
        assert (await resp.json())["components"] == [button]
    press = await dc.press(dc.created[0], "tusk:stop", dc.add_user("alice"))
    callback = f"{dc.api_base}/interactions/{press['id']}/{press['token']}/callback"
    async with dc.client.post(callback, json={"type": 8}) as resp:
        assert resp.status == 400
    async with dc.client.post(callback, json={"type": 6}) as first_answer, \
            dc.client.post(callback, json={"type": 6}) as second_answer:
        assert first_answer.status == 200 and (await second_answer.json())["code"] == 40060


async def test_an_enforced_nonce_makes_one_message_per_author_as_discord_documents(dc):
    """The same enforced nonce answers the first message as it is now, even in another channel (Discord scopes
    nonces to the author) and for voice messages; without enforce_nonce, or with a new nonce, a message is
    made; a nonce over 25 characters is refused."""
    auth = {"Authorization": "Bot tok"}

    async def post(channel, body):
        async with dc.client.post(f"{dc.api_base}/channels/{channel}/messages", json=body, headers=auth) as resp:
            return resp.status, await resp.json()

    _, first = await post("5", {"content": "one", "nonce": "n1", "enforce_nonce": True})
    async with dc.client.patch(f"{dc.api_base}/channels/5/messages/{first['id']}", json={"content": "edited"},
                               headers=auth):
        pass
    _, again = await post("5", {"content": "one again", "nonce": "n1", "enforce_nonce": True})
    _, elsewhere = await post("6", {"content": "one there", "nonce": "n1", "enforce_nonce": True})
    _, loose = await post("5", {"content": "not enforced", "nonce": "n1"})
    _, other = await post("5", {"content": "two", "nonce": "n2", "enforce_nonce": True})
    status, refused = await post("5", {"content": "long", "nonce": "x" * 26, "enforce_nonce": True})
    assert again["id"] == elsewhere["id"] == first["id"] and again["content"] == "edited"
    assert len({first["id"], loose["id"], other["id"]}) == 3 and (status, refused["code"]) == (400, 50035)
    assert [m["content"] for m in dc.sent] == ["one", "not enforced", "two"]
    assert [(r["channel_id"], r["id"]) for r in dc.repeats] == [("5", first["id"]), ("6", first["id"])]
    voice = encode(audio_file(1.0, "mp3"))
    payload = {"flags": IS_VOICE_MESSAGE, "nonce": "v1", "enforce_nonce": True,
               "attachments": [{"id": 0, "filename": "voice-message.ogg", "duration_secs": voice.duration,
                                "waveform": base64.b64encode(voice.waveform).decode()}]}
    made = [await post_voice(dc, "5", payload, voice.data) for _ in range(2)]
    assert made[0][1]["id"] == made[1][1]["id"] and len(dc.voices) == 1


async def post_voice(dc, channel, payload, data):
    form = aiohttp.FormData()
    form.add_field("payload_json", json.dumps(payload), content_type="application/json")
    form.add_field("files[0]", data, filename="voice-message.ogg")
    async with dc.client.post(f"{dc.api_base}/channels/{channel}/messages", data=form,
                              headers={"Authorization": f"Bot {dc.token}"}) as resp:
        return resp.status, await resp.json()


def test_shown_renders_discords_markdown_as_a_reader_sees_it():
    """An ordered list counts on from its first number (its indented and blank lines inside it); headings, quotes,
    bullets and emphasis lose their markers; a backslash shows the mark it escapes and keeps it from formatting."""
    assert shown("3. a\n  more\n\n5. b\nafter") == "3. a\n  more\n\n4. b\nafter"
    assert shown("# T\n-# small\n> q\n- x **y** *z* _w_ ~~s~~ ||p|| `c` a_b_c") == \
        "T\nsmall\nq\n• x y z w s p c a_b_c"
    assert shown("3\\. a\n5\\. b \\*c\\* \\# d") == "3. a\n5. b *c* # d"


async def identified(dc, shard=None, token="tok"):
    """A raw gateway connection that sent IDENTIFY (with `shard` if given); the socket, HELLO read."""
    ws = await dc.client.ws_connect(dc.gateway_url)
    assert (await ws.receive_json())["op"] == 10
    await ws.send_str(json.dumps({"op": 2, "d": {"token": token, "intents": 1 | MESSAGE_CONTENT,
                                                 **({"shard": shard} if shard is not None else {})}}))
    return ws


async def test_a_shard_gets_only_its_servers_and_dms_only_shard_zero(dc):
    """With `shard: [id, 2]`, READY and GUILD_CREATE list only the servers `(guild_id >> 22) % 2 == id`; a
    server's message reaches its shard's session alone, a DM shard 0's alone (per-session sequence numbers)."""
    dc.starts.max_concurrency = 2  # the two shards in two buckets: no wait between them
    first, second = dc.add_guild(id=guild_on(0, 2)), dc.add_guild(id=guild_on(1, 2))
    zero, one = await identified(dc, [0, 2]), await identified(dc, [1, 2])
    for ws, guild in ((zero, first), (one, second)):
        ready, created = await ws.receive_json(), await ws.receive_json()
        assert ready["t"] == "READY" and ready["d"]["guilds"] == [{"id": guild.id, "unavailable": True}]
        assert created["t"] == "GUILD_CREATE" and created["d"]["id"] == guild.id
    await dc.wait_sessions(0, 1)
    alice = dc.add_user("alice")
    await dc.message(first.add_channel(), alice, "to shard 0", guild=first)
    await dc.message(second.add_channel(), alice, "to shard 1", guild=second)
    await dc.message("7", alice, "a DM")
    got_zero = [await zero.receive_json() for _ in range(2)]
    assert [(e["d"]["content"], e["s"]) for e in got_zero] == [("to shard 0", 3), ("a DM", 4)]
    await dc.message(second.channels[0]["id"], alice, "sentinel", guild=second)
    got_one = [await one.receive_json() for _ in range(2)]
    assert [e["d"]["content"] for e in got_one] == ["to shard 1", "sentinel"]  # neither the DM nor shard 0's
    await zero.close()
    await one.close()


async def test_a_shard_id_not_below_the_count_is_closed_with_4010(dc):
    """IDENTIFY with `shard: [2, 2]`, or a malformed `shard`, is closed with 4010 Invalid shard and starts nothing."""
    for shard in ([2, 2], [0, 0], [-1, 2], ["0", 2], [0]):
        ws = await identified(dc, shard)
        await ws.receive()
        assert ws.close_code == 4010, shard
    assert dc.identifies == [] and dc.starts.started == 0


async def test_a_second_identify_in_a_bucket_within_5_s_is_an_invalid_session(dc):
    """Within 5 s of a session start, another IDENTIFY in the same bucket (`id % max_concurrency`) is answered
    op 9 (d: false); one in another bucket starts; GET /gateway/bot reports the limit and counts the starts."""
    dc.shards, dc.starts.max_concurrency = 4, 2
    first = await identified(dc, [0, 4])
    assert (await first.receive_json())["t"] == "READY"
    same_bucket, other_bucket = await identified(dc, [2, 4]), await identified(dc, [1, 4])
    assert await same_bucket.receive_json() == {"op": 9, "d": False}
    assert (await other_bucket.receive_json())["t"] == "READY"
    assert [i["shard"] for i in dc.identifies] == [[0, 4], [1, 4]] and dc.invalid_sessions[0]["shard"] == [2, 4]
    async with dc.client.get(f"{dc.api_base}/gateway/bot", headers={"Authorization": "Bot tok"}) as resp:
        info = await resp.json()
    assert info["shards"] == 4 and info["session_start_limit"] == {
        "total": 1000, "remaining": 998, "reset_after": 86_400_000, "max_concurrency": 2}
    for ws in (first, same_bucket, other_bucket):
        await ws.close()


async def test_too_many_servers_on_one_session_is_closed_with_4011(dc):
    """A session that would hold more servers than one shard may is closed with 4011 Sharding required."""
    dc.guilds_per_shard = 1
    dc.add_guild(id=guild_on(0, 2))
    dc.add_guild(id=guild_on(1, 2))
    ws = await identified(dc)
    await ws.receive()
    assert ws.close_code == 4011 and dc.identifies == []
