"""The web console's JSON API and page serving: every endpoint, bad input, hostile chat ids, the token."""

import asyncio
import fnmatch
import io
import json
import re
import tomllib
from pathlib import Path

import aiohttp
import pytest
from yarl import URL

from bot.app import TuskApp
from bot.events import ChatKey
from bot.errors import ConfigError
from channels.http import CONSOLE_DIR
from tests import procs
from tests.fakes.fake_llm import Reply
from tests.fakes.loopback import wait_until
from tests.conftest import with_helpers
from tests.settle import waiting_on
from tests.test_cli import env_for
from tests import kept

ROOT = Path(__file__).resolve().parent.parent


async def call(tusk, method, path, **kw):
    """(status, JSON body) of a request sent with `path` exactly as written (no normalising of `..`);
    a write without a body says it is JSON, as the console page does."""
    if method not in ("GET", "HEAD") and kw.get("json") is None and kw.get("data") is None:
        kw["headers"] = {"Content-Type": "application/json", **kw.get("headers", {})}
    async with tusk.client.request(method, URL(tusk.url + path, encoded=True), **kw) as resp:
        assert resp.content_type == "application/json", await resp.text()
        return resp.status, await resp.json()


async def chat_with_memory(tusk, chat="ann", memory="- Ann likes tea\n"):
    await tusk.say(chat, "hello")
    files = kept.files(tusk, "http", chat)
    files.memory.write_text(memory)
    return files


async def chat_with_memory_kept(tusk, chat="ann", memory="- Ann likes tea\n"):
    """A chat with a turn and MEMORY.md, written through the store (files, or the database); its handle."""
    await tusk.say(chat, "hello")
    handle = tusk.chats.handle(ChatKey("http", chat))
    await handle.write_memory(memory)
    return handle


def snapshot(root):
    return {str(p): p.stat().st_mtime_ns if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


async def test_page_and_assets_are_served_with_a_strict_policy(tusk):
    """GET / serves the console page and every script it loads, under a CSP that forbids inline and foreign code."""
    async with tusk.client.get(tusk.url + "/") as resp:
        page = await resp.text()
        assert resp.status == 200 and resp.content_type == "text/html"
        csp = resp.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp
    assert 'src="/console/app.js"' in page
    for name in ("app.js", "markdown.js", "console.css"):
        async with tusk.client.get(f"{tusk.url}/console/{name}") as resp:
            assert resp.status == 200 and resp.content_type in ("text/javascript", "text/css")
            assert resp.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ["/console/nope.js", "/console/..%2Fhttp.py", "/console/%2E%2E", "/console/app.JS",
                                  "/favicon.ico"])
async def test_only_console_files_are_served(tusk, path):
    """Anything but a file of the console folder is a JSON 404."""
    status, data = await call(tusk, "GET", path)
    assert status == 404 and "error" in data


def test_assets_ship_in_the_package_and_load_nothing_from_outside():
    """Every console file is package data, refers to no other host, and no script parses strings as HTML."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["channels"]
    files = sorted(CONSOLE_DIR.iterdir())
    assert {"index.html", "app.js", "markdown.js", "console.css"} <= {p.name for p in files}
    for path in files:
        assert any(fnmatch.fnmatch(f"console/{path.name}", g) for g in globs), f"{path.name} is not package data"
        text = path.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//""", text), path.name
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function", text), path.name


async def test_list_chats_filters_by_id_and_channel(tusk):
    """GET /api/chats lists every chat with its counts; ?q= matches part of the id, ?channel= one channel."""
    await chat_with_memory(tusk, "ann")
    await tusk.say("bob", "hi")
    status, data = await call(tusk, "GET", "/api/chats")
    assert status == 200 and [c["chat_id"] for c in data["chats"]] == ["ann", "bob"]
    ann = data["chats"][0]
    assert ann["channel"] == "http" and ann["messages"] == 2 and ann["memory_bytes"] == 16 and ann["last_active"]
    assert [c["chat_id"] for c in (await call(tusk, "GET", "/api/chats?q=AN"))[1]["chats"]] == ["ann"]
    assert (await call(tusk, "GET", "/api/chats?channel=telegram"))[1]["chats"] == []


async def test_chat_detail_reports_tokens_against_the_window(tusk):
    """GET /api/chats/{channel}/{id} gives counts, the pointer and the prompt estimate against the budget."""
    await chat_with_memory(tusk)
    status, chat = await call(tusk, "GET", "/api/chats/http/ann")
    budget, t = tusk.consolidator.budget, chat["tokens"]
    assert status == 200 and chat["total"] == 2 and chat["last_consolidated"] == 0 and chat["versions"] == 0
    assert t["prompt"] == t["system"] + t["history"] and t["history"] == kept.on_disk(tusk, "http", "ann").tokens
    assert (t["limit"], t["window"], t["reserve"]) == (budget.limit, budget.window, budget.reserve)
    assert t["memory"] > 0 and t["memory_max"] == tusk.consolidator.max_memory_tokens


@pytest.mark.both_stores
async def test_memory_put_writes_a_new_version(tusk):
    """PUT .../memory replaces MEMORY.md through write_memory: the old text becomes a version."""
    handle = await chat_with_memory_kept(tusk)
    status, memory = await call(tusk, "GET", "/api/chats/http/ann/memory")
    assert status == 200 and memory["text"] == "- Ann likes tea\n" and memory["tokens"] > 0
    status, saved = await call(tusk, "PUT", "/api/chats/http/ann/memory",
                               json={"text": "- Ann likes coffee\n", "etag": memory["etag"]})
    assert status == 200 and saved["versions"] == 1 and saved["text"] == "- Ann likes coffee\n"
    assert (await handle.memory()).text == "- Ann likes coffee\n"
    assert [v.text for v in await handle.versions()] == ["- Ann likes tea\n"]


@pytest.mark.both_stores
async def test_memory_put_after_a_change_is_a_conflict(tusk):
    """A save whose etag is stale (consolidation wrote meanwhile) is refused with 409 and changes nothing."""
    handle = await chat_with_memory_kept(tusk)
    _, memory = await call(tusk, "GET", "/api/chats/http/ann/memory")
    await handle.write_memory("- consolidation wrote this\n")
    status, data = await call(tusk, "PUT", "/api/chats/http/ann/memory", json={"text": "mine", "etag": memory["etag"]})
    assert status == 409 and "changed since you opened it" in data["error"]
    assert (await handle.memory()).text == "- consolidation wrote this\n"


async def test_memory_put_waits_for_the_chat_memory_lock(tusk):
    """A save waits while consolidation (or remember) holds the chat's MEMORY.md lock, then writes."""
    files = await chat_with_memory(tusk)
    lock = tusk.consolidator.lock(ChatKey("http", "ann"))
    async with lock:
        save = asyncio.ensure_future(call(tusk, "PUT", "/api/chats/http/ann/memory", json={"text": "- later\n"}))
        await wait_until(lambda: waiting_on(lock) or save.done(), what=lambda: "the save never waited for the lock")
        assert not save.done() and files.memory.read_text() == "- Ann likes tea\n"
    assert (await save)[0] == 200 and files.memory.read_text() == "- later\n"


@pytest.mark.parametrize("kw", [
    {"data": b"{not json", "headers": {"Content-Type": "application/json"}},
    {"json": {"text": 5}},
    {"json": {"text": ["a"]}},
    {"json": {}},
    {"json": {"text": "x", "extra": 1}},
    {"json": ["text"]},
    {"data": b"\xff\xfe\x00", "headers": {"Content-Type": "application/json"}},
], ids=["malformed", "number", "list", "missing", "extra-field", "array", "binary"])
async def test_memory_put_bad_bodies_are_400(tusk, kw):
    """Malformed JSON or a wrong shape gets a 400 JSON error saying what was expected; MEMORY.md is untouched."""
    files = await chat_with_memory(tusk)
    status, data = await call(tusk, "PUT", "/api/chats/http/ann/memory", **kw)
    assert status == 400 and data["error"].startswith('expected JSON {"text"')
    assert files.memory.read_text() == "- Ann likes tea\n" and not files.versions.exists()


async def test_oversize_body_is_413(tusk):
    """A body over 1 MiB is refused with a JSON 413."""
    files = await chat_with_memory(tusk)
    body = io.BytesIO(json.dumps({"text": "x" * (1024 * 1024 + 10)}).encode())
    status, data = await call(tusk, "PUT", "/api/chats/http/ann/memory", data=body,
                              headers={"Content-Type": "application/json"})
    assert status == 413 and "error" in data and files.memory.read_text() == "- Ann likes tea\n"


@pytest.mark.both_stores
async def test_versions_show_each_change_and_restore_one(tusk):
    """Versions list newest first with the change each replacement made; restoring one keeps the current text as a version."""
    handle = await chat_with_memory_kept(tusk, memory="- one\n")
    for text in ("- one\n- two\n", "- three\n"):
        await call(tusk, "PUT", "/api/chats/http/ann/memory", json={"text": text})
    status, data = await call(tusk, "GET", "/api/chats/http/ann/versions")
    names = [v["name"] for v in data["versions"]]
    assert status == 200 and len(names) == 2 and names == sorted(names, reverse=True)
    status, oldest = await call(tusk, "GET", f"/api/chats/http/ann/versions/{names[1]}")
    assert status == 200 and oldest["text"] == "- one\n" and oldest["diff"] == [[" ", "- one"], ["+", "- two"]]
    _, newest = await call(tusk, "GET", f"/api/chats/http/ann/versions/{names[0]}")
    assert newest["diff"] == [["-", "- one"], ["-", "- two"], ["+", "- three"]]
    status, restored = await call(tusk, "POST", f"/api/chats/http/ann/versions/{names[1]}/restore")
    assert status == 200 and restored["text"] == (await handle.memory()).text == "- one\n" and restored["versions"] == 3


@pytest.mark.parametrize("name", ["..%2FMEMORY.md", "MEMORY.md", "x", "..", "MEMORY.20260101T000000000000.md"])
async def test_unknown_versions_are_404(tusk, name):
    """A version name Tusk did not list is a 404, for viewing and for restoring."""
    files = await chat_with_memory(tusk)
    await call(tusk, "PUT", "/api/chats/http/ann/memory", json={"text": "- new\n"})
    assert (await call(tusk, "GET", f"/api/chats/http/ann/versions/{name}"))[0] == 404
    assert (await call(tusk, "POST", f"/api/chats/http/ann/versions/{name}/restore"))[0] == 404
    assert files.memory.read_text() == "- new\n"


@pytest.mark.both_stores
async def test_history_entries_newest_first_with_search(tusk):
    """HISTORY.md entries come newest first; ?q= keeps those holding every word, case-insensitively."""
    from datetime import datetime, timezone

    from store.base import Entry

    handle = await chat_with_memory_kept(tusk)
    day = [datetime(2026, 11, d, 10, 0, tzinfo=timezone.utc).timestamp() for d in (1, 2)]
    await handle.replace_history([Entry(day[0], "Planned the trip to Oslo."),
                                  Entry(day[1], "Booked the TRAIN to Bergen.")])
    status, data = await call(tusk, "GET", "/api/chats/http/ann/history")
    assert status == 200 and data["total"] == 2
    assert data["entries"][0] == {"heading": "2026-11-02 10:00 UTC", "text": "Booked the TRAIN to Bergen."}
    _, found = await call(tusk, "GET", "/api/chats/http/ann/history?q=train%20bergen")
    assert [e["heading"] for e in found["entries"]] == ["2026-11-02 10:00 UTC"] and found["total"] == 2


@pytest.mark.both_stores
async def test_session_marks_the_pointer_and_pages(tusk):
    """GET .../session gives messages with their index and the consolidation pointer; ?limit and ?before page back."""
    for text in ("one", "two", "three"):
        await tusk.say("ann", text)
    await tusk.chats.set_pointer(await kept.chat(tusk, "http", "ann"), 2)
    status, data = await call(tusk, "GET", "/api/chats/http/ann/session")
    assert status == 200 and data["total"] == 6 and data["last_consolidated"] == 2 and data["start"] == 0
    assert [(m["index"], m["role"]) for m in data["messages"][:2]] == [(0, "user"), (1, "assistant")]
    assert data["messages"][0]["content"] == "one"
    _, page = await call(tusk, "GET", "/api/chats/http/ann/session?limit=2&before=4")
    assert page["start"] == 2 and [m["content"] for m in page["messages"]][0] == "two"


@pytest.mark.parametrize("query", ["limit=0", "limit=-1", "limit=abc", "limit=5000", "before=x", "limit=1.5"])
async def test_session_bad_paging_is_400(tusk, query):
    """Paging values that are not whole numbers in range get a 400 JSON error."""
    await tusk.say("ann", "hi")
    status, data = await call(tusk, "GET", f"/api/chats/http/ann/session?{query}")
    assert status == 400 and "whole number" in data["error"]


@pytest.mark.both_stores
async def test_forget_is_the_chat_command(tusk, fake_llm, store_backend):
    """Forget lists what /forget lists, deletes the same, drops the chat from the running cache, and the bot forgets."""
    handle = await chat_with_memory_kept(tusk, "ann", "- Ann's secret is 4711\n")
    status, preview = await call(tusk, "GET", "/api/chats/http/ann/forget")
    assert status == 200 and preview["report"] == (await tusk.say("ann", "/forget"))[0]
    assert preview["items"][0].startswith("MEMORY.md") and preview["items"][1] == "2 session messages (session.jsonl)"
    assert preview["items"][2:] == ["1 usage record of this chat (who and where removed; the totals still count "
                                    "toward today's limits)"]
    for bad in ({}, {"confirm": False}, {"confirm": "yes"}, {"confirm": 1}):
        assert (await call(tusk, "POST", "/api/chats/http/ann/forget", json=bad))[0] == 400
    assert (await handle.memory()).text
    status, done = await call(tusk, "POST", "/api/chats/http/ann/forget", json={"confirm": True})
    assert status == 200 and done["gone"] and done["report"].startswith("Forgotten:")
    assert "- deleted 2 session messages (session.jsonl)" in done["report"]
    assert not await handle.exists() and await tusk.chats.chats() == []
    if store_backend == "files":
        assert not kept.files(tusk, "http", "ann").dir.exists() and not kept.cached(tusk, "http", "ann")
    assert (await call(tusk, "GET", "/api/chats/http/ann"))[0] == 404
    await tusk.say("ann", "what is my secret?")
    assert "4711" not in json.dumps(fake_llm.requests[-1]["messages"])


async def test_forget_waits_for_the_running_turn(tusk, fake_llm):
    """Forget while the chat's turn is running deletes after it, so the turn cannot write the chat back."""
    files = await chat_with_memory(tusk, "bo")
    fake_llm.script(Reply(text="slow answer", delay=0.5))
    turn = asyncio.create_task(tusk.say("bo", "one more thing"))
    await fake_llm.wait_for_requests(2)
    status, done = await call(tusk, "POST", "/api/chats/http/bo/forget", json={"confirm": True})
    assert await turn == ["slow answer"]
    assert status == 200 and "- deleted 4 session messages (session.jsonl)" in done["report"]
    assert not files.dir.exists()


ENDPOINTS = [("GET", "", None), ("GET", "/memory", None), ("PUT", "/memory", {"text": "pwned"}),
             ("GET", "/versions", None), ("GET", "/versions/x", None), ("POST", "/versions/x/restore", None),
             ("GET", "/history", None), ("GET", "/session", None), ("GET", "/forget", None),
             ("POST", "/forget", {"confirm": True})]


@pytest.mark.both_stores
async def test_a_chat_tusk_does_not_keep_is_404_everywhere(tusk, tmp_path):
    """Every endpoint answers 404 for a chat the store does not keep, and none creates it (no file, no row)."""
    before = snapshot(tmp_path)
    for method, suffix, body in ENDPOINTS:
        status, data = await call(tusk, method, f"/api/chats/http/nobody{suffix}", json=body)
        assert status == 404 and "no chat http:nobody" in data["error"], (method, suffix)
    assert snapshot(tmp_path) == before and await tusk.chats.chats() == []


@pytest.mark.parametrize("channel,chat_id", [
    ("http", ".."), ("http", "%2E%2E"), ("http", "..%2F..%2Fetc"), ("http", "%2Fetc%2Fpasswd"), ("http", "a%00b"),
    ("http", "x" * 300), ("http", "%7E..."), ("..", "ann"), ("%2E%2E", "ann"), ("HTTP", "ann"), ("a%2Fb", "ann"),
    ("x" * 40, "ann"),
], ids=lambda v: v[:12])
async def test_hostile_chat_ids_get_4xx_json_and_write_nothing(tusk, tmp_path, channel, chat_id):
    """Traversal, NUL and oversize ids or channels get a 4xx JSON error on every endpoint; no file changes anywhere."""
    await chat_with_memory(tusk)
    before = snapshot(tmp_path)
    for method, suffix, body in ENDPOINTS:
        status, data = await call(tusk, method, f"/api/chats/{channel}/{chat_id}{suffix}", json=body)
        assert status in (400, 404) and data["error"], (method, suffix, status)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("chat_id", ["a%00b", "a%0Ab", "%1B", "a%7Fb"])
async def test_control_characters_in_chat_ids_are_refused(tusk, tmp_path, chat_id):
    """A chat id holding NUL or another control character is a 400 for the console and the message API alike."""
    before = snapshot(tmp_path)
    for method, path, body in [("GET", f"/api/chats/http/{chat_id}/memory", None),
                               ("POST", f"/v1/chats/{chat_id}/messages", {"text": "hi"})]:
        status, data = await call(tusk, method, path, json=body)
        assert status == 400 and "control characters" in data["error"]
    assert snapshot(tmp_path) == before


async def test_token_guards_the_api_but_not_the_page(make_settings):
    """With TUSK_HTTP_TOKEN set the JSON API needs the bearer token; the page and its assets load without it."""
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN="s3cret-token"))
    http = app.add_http()
    async with app, aiohttp.ClientSession() as client:
        for path in ("/", "/console/app.js", "/healthz"):
            async with client.get(http.url + path) as resp:
                assert resp.status == 200, path
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with client.get(http.url + "/api/chats", headers=headers) as resp:
                assert resp.status == 401 and "TUSK_HTTP_TOKEN" in (await resp.json())["error"]
        async with client.get(http.url + "/api/chats", headers={"Authorization": "Bearer s3cret-token"}) as resp:
            assert resp.status == 200 and (await resp.json()) == {"chats": []}


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "tusk.example.com", ""])
async def test_exposed_host_without_a_long_token_refuses_to_start(make_settings, host):
    """A TUSK_HTTP_HOST beyond loopback with TUSK_HTTP_TOKEN=off or a short token is a ConfigError with the fix."""
    with pytest.raises(ConfigError, match="set TUSK_HTTP_TOKEN"):
        TuskApp(make_settings(TUSK_HTTP_HOST=host, TUSK_HTTP_TOKEN="off")).add_http()
    with pytest.raises(ConfigError, match="at least 32"):
        TuskApp(make_settings(TUSK_HTTP_HOST=host, TUSK_HTTP_TOKEN="t0ken")).add_http()
    TuskApp(make_settings(TUSK_HTTP_HOST=host or "0.0.0.0", TUSK_HTTP_TOKEN="t" * 32)).add_http()  # a long one may
    TuskApp(make_settings(TUSK_HTTP_HOST=host or "0.0.0.0")).add_http()  # so may the generated console token


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
async def test_loopback_hosts_may_serve_without_a_token(make_settings, host):
    """Loopback addresses may serve with TUSK_HTTP_TOKEN=off (and with a short token)."""
    TuskApp(make_settings(TUSK_HTTP_HOST=host, TUSK_HTTP_TOKEN="off")).add_http()
    TuskApp(make_settings(TUSK_HTTP_HOST=host, TUSK_HTTP_TOKEN="short")).add_http()


async def test_foreign_host_names_and_cross_origin_writes_are_refused(make_settings):
    """With TUSK_HTTP_TOKEN=off, a request for another host name (DNS rebinding) or a write from another origin
    (CSRF) is 403."""
    app = TuskApp(make_settings(TUSK_HTTP_TOKEN="off"))
    http = app.add_http()
    async with app, aiohttp.ClientSession(headers={"Origin": http.url}) as client:
        tusk = with_helpers(app, http, client)
        files = await chat_with_memory(tusk)
        status, data = await call(tusk, "GET", "/api/chats", headers={"Host": "evil.example:80"})
        assert status == 403 and "TUSK_HTTP_TOKEN" in data["error"]
        status, data = await call(tusk, "PUT", "/api/chats/http/ann/memory", json={"text": "pwned"},
                                  headers={"Origin": "http://evil.example"})
        assert status == 403 and "cross-origin" in data["error"] and files.memory.read_text() == "- Ann likes tea\n"
        own = {"Origin": tusk.url}
        assert (await call(tusk, "PUT", "/api/chats/http/ann/memory", json={"text": "- ok\n"}, headers=own))[0] == 200
        async with tusk.client.get(tusk.url + "/healthz", headers={"Host": "evil.example"}) as resp:
            assert resp.status == 200


async def test_tusk_run_prints_the_console_url(fake_llm, tmp_path):
    """`tusk run` with no platform credentials prints the URL, where the console page answers."""
    fake_llm.script(Reply(text="hi from the console"))
    proc = await procs.start_tusk("run",
                                  env=env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0"),
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        url = re.search(r"http://\S+", line)[0]
        assert "web console" in line
        async with aiohttp.ClientSession() as client, client.get(url + "/") as resp:
            assert resp.status == 200 and "<title>Tusk console</title>" in await resp.text()
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
        await proc.communicate()
