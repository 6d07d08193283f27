"""Same-host privacy: everything Tusk writes under $TUSK_HOME is owner-only whatever the umask, and
no chat folder or file is ever reached through a symlink."""

import asyncio
import os
import stat

import aiohttp
import pytest

from bot.app import TuskApp
from memory import files as memfiles
from memory.paths import ChatFiles, UnsafePathError
from memory.session import SessionStore
from tests import procs
from tests.conftest import with_helpers
from tests.fakes.fake_llm import Reply
from tests.test_cli import api_from, env_for
from tests.test_cli import tusk as tusk_cli


@pytest.fixture
def open_umask():
    """Run the test under umask 000 (anything not made owner-only on purpose would be world-writable)."""
    old = os.umask(0)
    yield
    os.umask(old)


def loose_modes(home):
    """Every path under `home` (and home) whose mode lets another account in."""
    paths = [home, *home.rglob("*")]
    return {str(p.relative_to(home)): oct(p.lstat().st_mode & 0o777) for p in paths
            if p.lstat().st_mode & 0o077 or (p.is_dir() and p.lstat().st_mode & 0o700 != 0o700)}


async def test_every_file_of_a_real_run_is_owner_only_under_umask_000(open_umask, make_settings, fake_llm):
    """Sessions, MEMORY.md, versions, HISTORY.md, settings.json, reminders.json, inbox.jsonl and the token are 0600 in 0700 folders."""
    fake_llm.script(Reply(text=None, tool_calls=[("r1", "remember", {"fact": "likes tea"})]), Reply(text="noted"),
                    Reply(text=None, tool_calls=[("r2", "remember", {"fact": "likes coffee"})]), Reply(text="noted"),
                    Reply(text=None, tool_calls=[("r3", "set_reminder", {"when": "in 0.3 seconds", "text": "tea"})]),
                    Reply(text="will do"), Reply(text="tea time!"),
                    Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "Talked about drinks.",
                                                                       "memory_update": "- likes tea\n"})]))
    app = TuskApp(make_settings())
    http = app.add_http()
    async with app:
        headers = {"Authorization": f"Bearer {http.settings.token}", "Origin": http.url}
        async with aiohttp.ClientSession(headers=headers) as client:
            tusk = with_helpers(app, http, client)
            await tusk.say("a", "remember tea")
            await tusk.say("a", "remember coffee")
            await tusk.say("a", "remind me")
            files = ChatFiles.locate(app.settings.home, "http", "a")
            for _ in range(100):
                if "tea time!" in files.session.read_text():
                    break
                await asyncio.sleep(0.05)
            await tusk.say("a", "/timezone Europe/Berlin")
            await tusk.say("a", "/new")
    home = app.settings.home
    made = {p.name for p in home.rglob("*")}
    assert {"console-token", "inbox.jsonl", "reminders.json", "session.jsonl", "MEMORY.md", "HISTORY.md",
            "versions", "settings.json"} <= made, made
    assert loose_modes(home) == {}


async def test_tusk_run_started_under_umask_000_keeps_its_files_private(fake_llm, tmp_path):
    """A real `tusk run` process started with umask 000: its data dir, token and chat files are owner-only."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    proc = await procs.start_tusk(
        "run", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, preexec_fn=lambda: os.umask(0))
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        url, headers = api_from(line)
        async with aiohttp.ClientSession(headers=headers) as client:
            async with client.post(f"{url}/v1/chats/z/messages", json={"text": "hello"}) as resp:
                assert resp.status == 200
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)
    home = tmp_path / "data"
    assert (home / "chats/http/z/session.jsonl").exists() and loose_modes(home) == {}


def test_a_symlinked_chat_folder_is_never_followed(tmp_path):
    """Reading or writing a chat whose folder (or channel folder, or file) is a symlink raises; the target is untouched."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    outside.mkdir()
    (outside / "session.jsonl").write_text("secret\n")
    (home / "chats/http").mkdir(parents=True)
    (home / "chats/http/a").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symlink"):
        ChatFiles.locate(home, "http", "a")
    with pytest.raises(UnsafePathError):
        SessionStore(home).get("http", "a")
    (home / "chats/telegram").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError):
        ChatFiles.locate(home, "telegram", "1")
    files = ChatFiles.locate(home, "http", "b")
    files.ensure()
    files.memory.symlink_to(outside / "session.jsonl")
    with pytest.raises(UnsafePathError):
        memfiles.read_memory(files)
    files.history.symlink_to(outside / "session.jsonl")
    with pytest.raises(UnsafePathError):
        memfiles.append_history(files, "x")
    assert (outside / "session.jsonl").read_text() == "secret\n" and sorted(os.listdir(outside)) == ["session.jsonl"]


@pytest.mark.parametrize("command", [["forget", "--yes"], ["export", "-o", "out.tar.gz"]])
async def test_forget_and_export_refuse_a_symlinked_chat_folder(fake_llm, tmp_path, command):
    """`tusk forget` / `tusk export` on a chat whose folder is a symlink: a clear message, exit 1, nothing touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "MEMORY.md").write_text("not Tusk's\n")
    (tmp_path / "data/chats/http").mkdir(parents=True)
    (tmp_path / "data/chats/http/a").symlink_to(outside)
    env = env_for(fake_llm, tmp_path)
    code, out, err = await tusk_cli(command[0], "http:a", *command[1:], env=env)
    assert code == 1 and "symlink" in err, (out, err)
    assert (outside / "MEMORY.md").read_text() == "not Tusk's\n" and not (tmp_path / "out.tar.gz").exists()


def test_export_skips_symlinks_inside_a_chat_folder(tmp_path):
    """A symlink planted inside a chat folder is left out of the export (never followed)."""
    from memory.chats import export

    (tmp_path / "secret").write_text("outside")
    files = ChatFiles.locate(tmp_path / "home", "http", "a")
    memfiles.write_memory(files, "- mine\n")
    (files.dir / "leak.md").symlink_to(tmp_path / "secret")
    names = export(files, tmp_path / "out.tar.gz")
    assert names == ["a/MEMORY.md"] and stat.S_IMODE((tmp_path / "out.tar.gz").stat().st_mode) == 0o600
