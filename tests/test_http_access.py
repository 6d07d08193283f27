"""Who may use the HTTP API: the console token, TUSK_HTTP_TOKEN=off, CSRF and header abuse, bounded connections."""

import asyncio
import json
import os
import re
import signal
import stat
import subprocess

import aiohttp
import pytest
import requests

from bot.app import TuskApp
from tests import procs
from tests.test_cli import api_from, env_for
from tests.test_cli import tusk as tusk_cli


async def test_first_start_makes_an_owner_only_token_that_the_api_requires(make_settings, fake_llm):
    """Without TUSK_HTTP_TOKEN a random token is written to $TUSK_HOME/console-token (0600) and kept across starts."""
    settings = make_settings()
    app = TuskApp(settings)
    http = app.add_http()
    path = settings.home / "console-token"
    token = path.read_text().strip()
    assert app.http_access.created and http.settings.token == token and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    async with app, aiohttp.ClientSession(headers={"Origin": http.url}) as client:
        async with client.get(http.url + "/api/chats") as resp:
            assert resp.status == 401
        async with client.post(http.url + "/v1/chats/a/messages", json={"text": "hi"}) as resp:
            assert resp.status == 401
        auth = {"Authorization": f"Bearer {token}"}
        async with client.post(http.url + "/v1/chats/a/messages", json={"text": "hi"}, headers=auth) as resp:
            assert resp.status == 200
    again = TuskApp(settings)
    assert again.add_http().settings.token == token and not again.http_access.created
    assert len(fake_llm.requests) == 1


async def test_http_token_off_opens_loopback_only(make_settings, fake_llm):
    """TUSK_HTTP_TOKEN=off: no token file, the loopback API answers without one."""
    settings = make_settings(TUSK_HTTP_TOKEN="off")
    app = TuskApp(settings)
    http = app.add_http()
    async with app, aiohttp.ClientSession(headers={"Origin": http.url}) as client:
        async with client.post(http.url + "/v1/chats/a/messages", json={"text": "hi"}) as resp:
            assert resp.status == 200
    assert http.settings.token is None and not (settings.home / "console-token").exists()


WRITE = "/v1/chats/a/messages"


@pytest.mark.parametrize("what,kw,status", [
    ("text/plain", {"data": '{"text": "hi"}', "headers": {"Content-Type": "text/plain"}}, 415),
    ("form", {"data": {"text": "hi"}}, 415),
    ("cross-site", {"json": {"text": "hi"}, "headers": {"Sec-Fetch-Site": "cross-site"}}, 403),
    ("same-site", {"json": {"text": "hi"}, "headers": {"Sec-Fetch-Site": "same-site"}}, 403),
    ("foreign Origin", {"json": {"text": "hi"}, "headers": {"Origin": "http://evil.example"}}, 403),
    ("null Origin", {"json": {"text": "hi"}, "headers": {"Origin": "null"}}, 403),
])
async def test_cross_site_writes_are_refused(tusk, fake_llm, what, kw, status):
    """Writes that are not JSON from this server's own origin are refused before anything runs."""
    headers = {k: v for k, v in {**tusk.client.headers, **kw.pop("headers", {})}.items() if v is not None}
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(tusk.url + WRITE, **kw) as resp:
            assert resp.status == status and "error" in await resp.json(), what
        async with client.put(tusk.url + "/api/chats/http/a/memory", **kw) as resp:
            assert resp.status == status, what
    assert fake_llm.requests == [] and not (tusk.settings.home / "chats").exists()


async def test_multipart_is_taken_for_messages_only_and_same_origin_only(tusk, fake_llm):
    """A message with files may be multipart (issue 18), from this origin only; other writes stay JSON-only."""
    def form():
        return aiohttp.FormData({"text": "hi"}, default_to_multipart=True)

    async with tusk.client.put(tusk.url + "/api/chats/http/a/memory", data=form()) as resp:
        assert resp.status == 415
    headers = {**tusk.client.headers, "Origin": "http://evil.example"}
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(tusk.url + WRITE, data=form()) as resp:
            assert resp.status == 403
    assert fake_llm.requests == []
    async with tusk.client.post(tusk.url + WRITE, data=form()) as resp:
        assert resp.status == 200 and (await resp.json())["replies"][0].startswith("echo: ")


async def test_a_plain_api_client_needs_only_the_bearer_token(tusk, fake_llm):
    """curl and `requests` with a bearer token and no Origin (as scripts send them) get their answer."""
    url, auth = tusk.url + WRITE, f"Authorization: Bearer {tusk.token}"
    done = await asyncio.to_thread(
        subprocess.run, ["curl", "-s", "-H", auth, "-H", "Content-Type: application/json", "-d", '{"text": "hi"}', url],
        capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]})
    assert json.loads(done.stdout)["replies"][0].startswith("echo: "), done
    resp = await asyncio.to_thread(requests.post, url, json={"text": "again"}, timeout=30,
                                   headers={"Authorization": f"Bearer {tusk.token}"})
    assert resp.status_code == 200 and resp.json()["replies"][0].startswith("echo: ")


async def test_without_a_token_writes_must_say_they_are_same_origin(make_settings, fake_llm):
    """TUSK_HTTP_TOKEN=off keeps the same-origin rule: a write with no Origin is refused."""
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN="off"))
    http = app.add_http()
    async with app, aiohttp.ClientSession() as client:
        async with client.post(http.url + WRITE, json={"text": "hi"}) as resp:
            assert resp.status == 403 and "Origin" in (await resp.json())["error"]
    assert fake_llm.requests == []


async def test_same_origin_fetch_metadata_is_enough(tusk):
    """A browser's same-origin request (Sec-Fetch-Site: same-origin, even without Origin) is accepted."""
    headers = {"Authorization": f"Bearer {tusk.token}", "Sec-Fetch-Site": "same-origin"}
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(tusk.url + WRITE, json={"text": "hi"}) as resp:
            assert resp.status == 200


async def raw_request(port, head: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    return data


async def test_a_non_utf8_authorization_header_is_a_400(tusk):
    """Authorization bytes that are not UTF-8 get a 400 JSON answer, not a 500."""
    port = int(tusk.url.rsplit(":", 1)[1])
    answer = await raw_request(port, b"GET /api/chats HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                     b"Authorization: Bearer \xff\xfe\xc3\x28\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400") and b"UTF-8" in answer


async def test_header_read_time_and_idle_connections_are_bounded(make_settings):
    """A connection that never finishes its request head, or idles after a request, is closed after the timeout."""
    app = TuskApp(make_settings(TUSK_HTTP_IDLE_TIMEOUT="0.5"))
    http = app.add_http()
    async with app:
        slow_r, slow_w = await asyncio.open_connection("127.0.0.1", http.port)
        slow_w.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never finished
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", http.port)
        idle_w.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await idle_r.readuntil(b'{"ok": true}')
        assert await asyncio.wait_for(slow_r.read(), timeout=5) == b""  # closed by the server
        assert await asyncio.wait_for(idle_r.read(), timeout=5) == b""
        slow_w.close()
        idle_w.close()


async def test_past_the_connection_limit_the_oldest_idle_one_makes_room(make_settings):
    """With TUSK_HTTP_MAX_CONNECTIONS=8, 40 half-open connections leave /healthz answering."""
    app = TuskApp(make_settings(TUSK_HTTP_MAX_CONNECTIONS="8"))
    http = app.add_http()
    async with app:
        flood = [await asyncio.open_connection("127.0.0.1", http.port) for _ in range(40)]
        for _, writer in flood:
            writer.write(b"GET / HTTP/1.1\r\n")
        async with aiohttp.ClientSession() as client, client.get(http.url + "/healthz") as resp:
            assert resp.status == 200
        open_ones = [c for c in http._runner.server.connections if c.transport and not c.transport.is_closing()]
        assert len(open_ones) <= 8
        for _, writer in flood:
            writer.close()


async def test_console_url_and_first_start_print_the_token(fake_llm, tmp_path):
    """`tusk run` prints the console link with its token at first start only; `tusk console-url` prints it again."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    lines = []
    for _ in range(2):
        proc = await procs.start_tusk("run", env=env, cwd=tmp_path,
                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        lines.append((await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode())
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    token = (tmp_path / "data/console-token").read_text().strip()
    assert f"/#token={token}" in lines[0] and token not in lines[1] and "tusk console-url" in lines[1]
    code, out, _ = await tusk_cli("console-url", env={**env, "TUSK_HTTP_PORT": "8765"})
    assert code == 0 and out.strip() == f"http://127.0.0.1:8765/#token={token}"
    code, out, _ = await tusk_cli("console-url", env={**env, "TUSK_HTTP_TOKEN": "off", "TUSK_HTTP_PORT": "8765"})
    assert code == 0 and out.strip() == "http://127.0.0.1:8765/"
    assert api_from(lines[0])[1]["Authorization"] == f"Bearer {token}"


async def test_run_refuses_a_short_token_beyond_loopback(fake_llm, tmp_path):
    """`tusk run` on 0.0.0.0 with a short TUSK_HTTP_TOKEN exits 2 with one line naming the rule; doctor fails it too."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_HOST="0.0.0.0", TUSK_HTTP_PORT="0", TUSK_HTTP_TOKEN="short-token")
    code, out, err = await tusk_cli("run", env=env)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "at least 32" in err
    code, out, _ = await tusk_cli("doctor", "--no-model", env=env)
    assert code == 1 and re.search(r"FAIL  HTTP access: .*at least 32", out)
