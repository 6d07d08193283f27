"""One Tusk per home: a second `tusk run` is refused naming the first; `tusk chat` beside a running Tusk talks
through it (streamed, the same chat, its commands, Ctrl-C); a reminder due meanwhile is delivered once; a turn
still open in the running Tusk is not taken for a crash leftover; `tusk forget` goes through it; `tusk doctor`
tells this home's Tusk from another home's on the HTTP port."""

import asyncio
import io
import json
import re
import signal
from datetime import datetime, timedelta, timezone
from pathlib import Path

import aiohttp
import pexpect

from tests import procs
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_cli import api_from, env_for
from tests.test_terminal_chat import chat_env, ended, in_pty, started

PIPE = asyncio.subprocess.PIPE


class Output:
    """A process's output stream read as it comes: `until(marker)` returns what arrived up to the marker."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.text = ""
        self.pos = 0

    async def until(self, marker: str, timeout: float = procs.FIRST_TURN) -> str:
        async def read() -> None:
            while marker not in self.text[self.pos:]:
                chunk = await self.stream.read(4096)
                if not chunk:
                    raise AssertionError(f"the output ended before {marker!r}: {self.text[self.pos:]!r}")
                self.text += chunk.decode(errors="replace")

        try:
            await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            raise AssertionError(f"no {marker!r} within {timeout} s: {self.text[self.pos:]!r}") from None
        end = self.text.index(marker, self.pos) + len(marker)
        seen, self.pos = self.text[self.pos:end], end
        return seen

    async def rest(self) -> str:
        self.text += (await self.stream.read()).decode(errors="replace")
        return self.text[self.pos:]


async def start_run(env, expect="Tusk is running"):
    """`tusk run` started: (process, its base URL, headers for its API)."""
    proc = await procs.start_tusk("run", env=env, stdout=PIPE, stderr=PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
    assert expect in line, line + (await proc.stderr.read()).decode()
    url, headers = api_from(line, Path(env["TUSK_HOME"]))
    return proc, url, headers


async def start_chat(env, *args):
    proc = await procs.start_tusk("chat", *args, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE)
    return proc, Output(proc.stdout)


async def stopped(proc) -> int:
    proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(proc.wait(), timeout=30)


def requests_with(fake_llm, text):
    """Chat requests (not consolidation) whose newest message carries `text`."""
    return [b for b in fake_llm.requests if text in str(b["messages"][-1]["content"])]


async def test_a_second_run_is_refused_naming_the_first(fake_llm, tmp_path):
    """A second `tusk run` on the home exits 1 at once with one line naming the running one's pid and address;
    the first goes on answering."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    first, url, headers = await start_run(env)
    code, out, err = await procs.tusk("run", env=env, timeout=30)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"pid {first.pid}, {url}" in err and "stop it first" in err
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(f"{url}/v1/chats/z/messages", json={"text": "ping"}) as resp:
            [reply] = (await resp.json())["replies"]
            assert resp.status == 200 and reply.startswith("echo:") and reply.endswith("ping")
    assert await stopped(first) == 0


async def test_a_record_left_by_a_killed_tusk_blocks_nothing(fake_llm, tmp_path):
    """After `kill -9` the lock file still names the dead Tusk, yet the next `tusk run` starts (the flock decides)."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    first, _, _ = await start_run(env)
    first.send_signal(signal.SIGKILL)
    await first.wait()
    assert json.loads((tmp_path / "data/tusk.lock").read_text())["pid"] == first.pid
    again, _, _ = await start_run(env)
    assert json.loads((tmp_path / "data/tusk.lock").read_text())["pid"] == again.pid
    assert await stopped(again) == 0


async def test_chat_beside_run_talks_through_it(fake_llm, tmp_path):
    """`tusk chat` while `tusk run` serves the home: the turn runs in that Tusk (its /metrics counts it), the
    reply shows on the terminal while the model is still writing it, commands work, and the chat is the same
    `terminal:work` a chat alone uses (its messages are there once the Tusk is stopped)."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, url, headers = await start_run(env)
    hold = asyncio.Event()
    fake_llm.script(Reply(text=" ".join(f"word{n}" for n in range(60)), hold=hold, hold_after=40))
    chat, out = await start_chat(env, "--chat", "work")
    greeting = await out.until("you> ")
    assert f"pid {run.pid}" in greeting and url in greeting
    chat.stdin.write(b"tell me a long story\n")
    shown = await out.until("word20")
    assert "word59" not in shown and fake_llm.last_tokens == []  # the model is still held mid-reply
    hold.set()
    await out.until("word59")
    chat.stdin.write(b"/status\n")
    assert "Messages in this chat: 2" in await out.until("you> ", 30) + await out.until("you> ", 30)
    chat.stdin.close()
    assert await asyncio.wait_for(chat.wait(), 30) == 0
    async with aiohttp.ClientSession(headers=headers) as client, client.get(f"{url}/metrics") as resp:
        metrics = await resp.text()
    counted = re.search(r'tusk_turns_total\{channel="terminal",outcome="ok"\} (\S+)', metrics)
    assert counted and float(counted[1]) >= 1, metrics  # the turn ran in the running Tusk
    assert await stopped(run) == 0
    code, alone, err = await procs.tusk("chat", "--chat", "work", env=env, stdin=b"/status\n")
    assert code == 0 and "Messages in this chat: 2" in alone, err


async def test_chat_beside_run_needs_no_model_of_its_own(fake_llm, tmp_path):
    """Beside a running Tusk, `tusk chat` started without TUSK_MODEL still talks (the running Tusk has the model)."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, _, _ = await start_run(env)
    bare = {k: v for k, v in env.items() if k != "TUSK_MODEL"}
    code, out, err = await procs.tusk("chat", env=bare, stdin=b"hello there\n")
    assert code == 0 and "Tusk> echo: " in out and "hello there" in out, err
    assert await stopped(run) == 0


async def test_a_reminder_due_while_both_run_is_delivered_once(fake_llm, tmp_path):
    """A terminal chat's reminder due while `tusk run` and `tusk chat` both run is one turn, shown once on the
    connected terminal and saved once; a second reminder due after it is the sentinel that all has arrived."""
    home = tmp_path / "data"
    (home / "chats/terminal/local").mkdir(parents=True, mode=0o700)
    now = datetime.now(timezone.utc)

    def reminder(rid, text, seconds):
        return {"id": rid, "channel": "terminal", "chat_id": "local", "timezone": "UTC", "text": text,
                "due": (now + timedelta(seconds=seconds)).isoformat(), "created": now.isoformat()}

    (home / "reminders.json").write_text(json.dumps({"schema": 1, "reminders": [
        reminder("r1", "water-the-plants", 12), reminder("r2", "sentinel-call", 14)]}))
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, _, _ = await start_run(env)
    chat, out = await start_chat(env)
    await out.until("you> ")
    await out.until("sentinel-call", timeout=60)
    chat.stdin.close()
    await out.rest()
    shown = out.text
    assert await asyncio.wait_for(chat.wait(), 30) == 0
    assert await stopped(run) == 0
    assert len(requests_with(fake_llm, "water-the-plants")) == 1
    assert shown.count("water-the-plants") == 1
    session = (home / "chats/terminal/local/session.jsonl").read_text()
    assert session.count("[reminder r1") == 1 and session.count("[reminder r2") == 1
    assert json.loads((home / "reminders.json").read_text())["reminders"] == []


async def test_a_turn_open_in_the_running_tusk_is_not_replayed(fake_llm, tmp_path):
    """A Telegram turn still being answered by `tusk run` is not taken for a crash leftover when `tusk chat`
    starts beside it: the model is asked once for it (the chat's own reply is the sentinel)."""
    async with FakeTelegram() as tg:
        env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TELEGRAM_BOT_TOKEN=tg.token,
                      TELEGRAM_API_BASE=tg.base_url, TELEGRAM_ALLOW_FROM="7")
        run, _, _ = await start_run(env, expect="running on telegram")
        fake_llm.script(Reply(text="slow answer", delay=60))
        tg.push_message(42, "still being answered")
        await fake_llm.wait_for_requests(1, timeout=procs.FIRST_TURN)
        code, out, err = await procs.tusk("chat", env=env, stdin=b"hello\n")
        assert code == 0 and "Tusk> echo: " in out and "hello" in out, err
        assert len(requests_with(fake_llm, "still being answered")) == 1
        run.kill()  # the slow turn is still under way
        await run.wait()


async def test_ctrl_c_in_a_chat_beside_run_cancels_the_turn_there(fake_llm, tmp_path):
    """At a terminal beside `tusk run`: Ctrl-C while the model is slow cancels that turn in the running Tusk
    (nothing saved), and the chat goes on with the next message."""
    env = chat_env(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, _, _ = await start_run(env)
    fake_llm.script(Reply(text="too late", delay=60))

    def scenario():
        child = started(env)
        assert f"Through the Tusk running on this home (pid {run.pid}" in child.before
        child.send("slow one\r")
        child.expect("slow one")
        while not fake_llm.requests:
            child.expect([pexpect.TIMEOUT], timeout=0.05)
        child.sendcontrol("c")
        child.expect("cancelled", timeout=20)
        child.expect("you>")
        child.send("quick one\r")
        child.expect("Tusk>")
        child.expect("you>")
        child.sendcontrol("d")
        return ended(child)

    code, rest = await in_pty(scenario)
    assert code == 0 and "Traceback" not in rest
    session = (tmp_path / "data/chats/terminal/local/session.jsonl").read_text()
    assert "quick one" in session and "slow one" not in session and "too late" not in session
    assert await stopped(run) == 0


def forget_then_talk(env):
    """At a terminal: a message, `/forget confirm`, then more lines (a command, a message, a command); the whole
    screen. Each step waits for its own answer, so a line the prompt failed to take would stall it."""
    child = started(env)
    child.logfile_read = screen = io.StringIO()
    child.send("remember my plan\r")
    child.expect("first answer")
    child.expect("you>")
    child.send("/forget confirm\r")
    child.expect("Forgotten:")
    child.expect("you>")
    child.send("/status\r")
    child.expect("Messages in this chat: 0")
    child.expect("you>")
    child.send("after forgetting\r")
    child.expect("second answer")
    child.expect("you>")
    child.send("/status\r")
    child.expect("Messages in this chat: 2")
    child.expect("you>")
    child.sendcontrol("d")
    code, _ = ended(child)
    return code, screen.getvalue()


async def test_forget_confirm_at_the_terminal_then_more_lines(fake_llm, tmp_path):
    """`/forget confirm` in `tusk chat` removes the chat's folder; the lines typed after it are taken as usual and
    print no traceback (the input history waits for the folder to be back)."""
    fake_llm.script(Reply(text="first answer"), Reply(text="second answer"))
    code, screen = await in_pty(forget_then_talk, chat_env(fake_llm, tmp_path))
    assert code == 0 and "Traceback" not in screen and "No such file" not in screen, screen
    assert "Traceback" not in (tmp_path / "data/tusk-chat.log").read_text()
    session = (tmp_path / "data/chats/terminal/local/session.jsonl").read_text()
    assert "after forgetting" in session and "remember my plan" not in session
    history = (tmp_path / "data/chats/terminal/local/input-history").read_text()
    assert "remember my plan" not in history and "/status" in history


async def test_forget_confirm_in_a_chat_beside_run(fake_llm, tmp_path):
    """The same beside `tusk run`: the running Tusk forgets the chat, the terminal goes on without a traceback."""
    env = chat_env(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, _, _ = await start_run(env)
    fake_llm.script(Reply(text="first answer"), Reply(text="second answer"))
    code, screen = await in_pty(forget_then_talk, env)
    assert code == 0 and "Traceback" not in screen and "No such file" not in screen, screen
    session = (tmp_path / "data/chats/terminal/local/session.jsonl").read_text()
    assert "after forgetting" in session and "remember my plan" not in session
    assert await stopped(run) == 0


async def test_a_second_engine_beside_a_chat_alone_is_refused(fake_llm, tmp_path):
    """While a `tusk chat` runs alone on the home (no HTTP API to talk through), a second `tusk chat`, a
    `tusk run` and a `tusk forget` are each refused with one line naming it."""
    env = env_for(fake_llm, tmp_path)
    alone, out = await start_chat(env)
    await out.until("you> ")
    for argv in (("chat",), ("run",), ("forget", "terminal:local", "--yes")):
        code, _, err = await procs.tusk(*argv, env=env, timeout=30)
        assert code == 1 and len(err.strip().splitlines()) == 1, (argv, err)
        assert f"pid {alone.pid}, `tusk chat`" in err, (argv, err)
    alone.stdin.close()
    assert await asyncio.wait_for(alone.wait(), 30) == 0


async def test_forget_beside_run_goes_through_it(fake_llm, tmp_path):
    """`tusk forget` while `tusk run` serves the home is the running Tusk's own /forget: the chat's reminder is
    gone for good (a later change to reminders.json by that Tusk does not bring it back)."""
    home = tmp_path / "data"
    (home / "chats/telegram/42").mkdir(parents=True, mode=0o700)
    due = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
    (home / "reminders.json").write_text(json.dumps({"schema": 1, "reminders": [
        {"id": "r1", "channel": "telegram", "chat_id": "42", "timezone": "UTC", "text": "secret errand",
         "due": due, "created": due}]}))
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, url, headers = await start_run(env)
    code, out, err = await procs.tusk("forget", "telegram:42", "--yes", env=env)
    assert code == 0 and "reminder" in out and "deleted" in out.lower(), out + err
    assert not (home / "chats/telegram/42").exists()
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "set_reminder", {"when": "in 2 days", "text": "other"})]),
                    Reply(text="set"))
    async with aiohttp.ClientSession(headers=headers) as client:
        async with client.post(f"{url}/v1/chats/x/messages", json={"text": "remind me"}) as resp:
            assert resp.status == 200
    texts = [r["text"] for r in json.loads((home / "reminders.json").read_text())["reminders"]]
    assert texts == ["other"]
    assert await stopped(run) == 0


async def test_doctor_tells_this_homes_tusk_from_another_homes(fake_llm, tmp_path):
    """On the port a Tusk of another home serves, `tusk doctor` fails the HTTP port check saying so; for the
    home that Tusk serves, the check is ok and names its pid."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0")
    run, url, _ = await start_run(env)
    port = url.rsplit(":", 1)[1]
    other = env_for(fake_llm, tmp_path / "other", TUSK_HTTP_PORT=port)
    code, out, _ = await procs.tusk("doctor", "--no-model", env=other)
    [line] = [line for line in out.splitlines() if "HTTP port:" in line]
    assert code == 1 and line.startswith("FAIL") and "another home" in line, out
    code, out, _ = await procs.tusk("doctor", "--no-model", env={**env, "TUSK_HTTP_PORT": port})
    [line] = [line for line in out.splitlines() if "HTTP port:" in line]
    assert line.startswith("OK") and "this home's Tusk" in line and f"pid {run.pid}" in line, out
    assert await stopped(run) == 0


async def test_run_and_chat_without_a_model_point_to_tusk_init(fake_llm, tmp_path):
    """Before any setup (no TUSK_MODEL), `tusk run` and `tusk chat` say to run `tusk init`."""
    env = env_for(fake_llm, tmp_path)
    del env["TUSK_MODEL"]
    for command in ("run", "chat"):
        code, _, err = await procs.tusk(command, env=env)
        assert code == 2 and "TUSK_MODEL is not set" in err and "`tusk init`" in err, (command, err)
