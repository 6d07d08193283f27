"""The local HTTP API: replies, auth, bad input and hostile chat ids."""

import io
import json

import aiohttp
import pytest

from bot.app import TuskApp


async def post(tusk, path, **kw):
    async with tusk.client.post(tusk.url + path, **kw) as resp:
        return resp.status, await resp.json()


async def test_healthz(tusk):
    """GET /healthz answers 200."""
    async with tusk.client.get(tusk.url + "/healthz") as resp:
        assert resp.status == 200 and (await resp.json()) == {"ok": True}


@pytest.mark.parametrize("body,kw", [
    ("malformed", {"data": b"{not json", "headers": {"Content-Type": "application/json"}}),
    ("no text", {"json": {"user": "x"}}),
    ("empty text", {"json": {"text": ""}}),
    ("wrong type", {"json": {"text": 5}}),
    ("array", {"json": ["hi"]}),
    ("binary", {"data": b"\xff\xfe\x00", "headers": {"Content-Type": "application/json"}}),
])
async def test_bad_bodies_get_400_with_json_error(tusk, fake_llm, body, kw):
    """Malformed or incomplete requests get a 4xx JSON error and never reach the model."""
    status, data = await post(tusk, "/v1/chats/a/messages", **kw)
    assert status == 400 and "error" in data and fake_llm.requests == []


async def test_oversize_body_is_413(tusk, fake_llm):
    """Bodies over 1 MiB are refused with a JSON error."""
    status, data = await post(tusk, "/v1/chats/a/messages", data=io.BytesIO(json.dumps({"text": "x" * (1024 * 1024 + 10)}).encode()),
                              headers={"Content-Type": "application/json"})
    assert status == 413 and "error" in data and fake_llm.requests == []


async def test_unknown_route_is_json_404(tusk):
    """Unknown paths answer a JSON 404."""
    status, data = await post(tusk, "/v2/nothing", json={})
    assert status == 404 and "error" in data


@pytest.mark.parametrize("raw_id", ["..", "%2E%2E", "..%2F..%2Fetc", "a%00b", "%7Eabc", "x" * 300])
async def test_hostile_chat_ids_stay_inside_their_folder(tusk, raw_id):
    """Traversal-looking ids either get a 400 or land in a folder directly under chats/http/."""
    async with tusk.client.post(f"{tusk.url}/v1/chats/{raw_id}/messages", json={"text": "hi"}) as resp:
        assert resp.status in (200, 400, 404)
    home = tusk.settings.home.resolve()
    for path in home.rglob("*"):
        if path in (home / "console-token", home / "tusk.lock") or path.name.startswith("usage.sqlite"):  # the home's own files
            continue
        assert path.resolve().is_relative_to(home / "chats" / "http") or path.resolve() in (home / "chats", home / "chats" / "http")


async def test_token_is_required_when_set(make_settings, fake_llm):
    """With TUSK_HTTP_TOKEN set, requests without the right bearer token get 401; healthz stays open."""
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN="s3cret-token"))
    http = app.add_http()
    async with app, aiohttp.ClientSession(headers={"Origin": http.url}) as client:
        url = f"http://127.0.0.1:{http.port}/v1/chats/a/messages"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            async with client.post(url, json={"text": "hi"}, headers=headers) as resp:
                assert resp.status == 401 and "error" in await resp.json()
        async with client.post(url, json={"text": "hi"}, headers={"Authorization": "Bearer s3cret-token"}) as resp:
            assert resp.status == 200 and (await resp.json())["replies"]
        async with client.get(f"http://127.0.0.1:{http.port}/healthz") as resp:
            assert resp.status == 200
    assert len(fake_llm.requests) == 1
