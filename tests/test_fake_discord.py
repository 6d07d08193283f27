"""The fake Discord itself, spoken to with plain aiohttp: what discord.py relies on is there."""

import json

import aiohttp
import pytest

from tests.fakes.fake_discord import FakeDiscord, shown


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


def test_shown_renders_discords_markdown_as_a_reader_sees_it():
    """An ordered list counts on from its first number (its indented and blank lines inside it); headings, quotes,
    bullets and emphasis lose their markers; a backslash shows the mark it escapes and keeps it from formatting."""
    assert shown("3. a\n  more\n\n5. b\nafter") == "3. a\n  more\n\n4. b\nafter"
    assert shown("# T\n-# small\n> q\n- x **y** *z* _w_ ~~s~~ ||p|| `c` a_b_c") == \
        "T\nsmall\nq\n• x y z w s p c a_b_c"
    assert shown("3\\. a\n5\\. b \\*c\\* \\# d") == "3. a\n5. b *c* # d"
