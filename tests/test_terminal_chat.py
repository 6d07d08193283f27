"""`tusk chat` at a real terminal (a pseudo-terminal driven by pexpect): editing keys, history, pastes, long
messages, the log kept off the screen, Ctrl-C. The scenarios run in a thread: the fake LLM serves on the loop."""

import asyncio
import io
import os
import stat

import pexpect

from tests import procs
from tests.fakes.fake_llm import Reply
from tests.test_cli import env_for

LEFT, UP = "\x1b[D", "\x1b[A"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


def chat_env(fake_llm, tmp_path, **extra):
    """A clean environment for a terminal that answers no cursor-position requests (pexpect emulates none)."""
    return env_for(fake_llm, tmp_path, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1", **extra)


def user_texts(fake_llm):
    """What each chat request carried as its newest user message (the runtime block stripped)."""
    texts = [r["messages"][-1]["content"] for r in fake_llm.requests]
    return [t.split("]\n\n", 1)[-1] if t.startswith("[context:") else t for t in texts]


async def in_pty(scenario, *args):
    return await asyncio.to_thread(scenario, *args)


def started(env, *args):
    child = procs.spawn_tusk("chat", *args, env=env)
    child.expect("you>")
    return child


EXIT_DEADLINE = 120  # seconds a chat that was told to end may take to exit


def ended(child) -> tuple[int, str]:
    """Wait for the chat to end: (exit code, what it printed last). Its exit may take long on a loaded machine
    (litellm's objects torn down): a hang, not a speed limit, is what the deadline catches."""
    child.expect(pexpect.EOF, timeout=EXIT_DEADLINE)
    rest = child.before
    child.close()
    return child.exitstatus, rest


async def test_editing_keys_history_and_pastes(fake_llm, tmp_path):
    """In one chat, as a person types: left arrows and an insertion correct a typo before Enter; Up brings the
    message back; the history is 0600. A bracketed 3-line paste (plus Esc-Enter and a fourth line) is one
    turn; a 40,000-character paste is not cut at 4,095 characters but arrives whole and gets the length answer."""
    def scenario():
        child = started(chat_env(fake_llm, tmp_path))
        child.send("helo world")
        child.send(LEFT * 7 + "l\r")
        child.expect("Tusk>")
        child.expect("you>")
        child.send(UP + "\r")
        child.expect("Tusk>")
        child.expect("you>")
        child.send(f"{PASTE_START}line one\rline two\rline three{PASTE_END}")
        child.send("\x1b\r" + "and four\r")
        child.expect("Tusk>")
        child.expect("you>")
        child.send(PASTE_START + "x" * 40_000 + PASTE_END + "\r")
        child.expect("40,000 characters long", timeout=60)
        child.expect("you>")
        child.sendcontrol("d")
        return ended(child)

    code, _ = await in_pty(scenario)
    assert code == 0
    assert user_texts(fake_llm) == ["hello world", "hello world", "line one\nline two\nline three\nand four"]
    history = tmp_path / "data/chats/terminal/local/input-history"
    assert "+hello world" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


async def test_log_lines_stay_out_of_the_conversation(fake_llm, tmp_path):
    """A failed turn's warning goes to $TUSK_HOME/tusk-chat.log (0600), never onto the screen."""
    fake_llm.script(Reply(status=500))

    def scenario():
        child = started(chat_env(fake_llm, tmp_path))
        screen = child.before
        child.send("hi\r")
        child.expect("try again in a minute")
        screen += child.before
        child.expect("you>")
        screen += child.before
        child.sendcontrol("d")
        code, rest = ended(child)
        return code, screen + rest

    code, screen = await in_pty(scenario)
    log = tmp_path / "data/tusk-chat.log"
    assert code == 0 and "turn abandoned" in log.read_text()
    assert "turn abandoned" not in screen and "WARNING" not in screen
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


async def test_ctrl_c_cancels_the_turn_or_ends_the_chat(fake_llm, tmp_path):
    """Ctrl-C while the model is slow cancels that turn (nothing saved) and the chat goes on; Ctrl-C clears a
    half-typed line, and at an empty prompt ends the chat: exit code 0, no traceback."""
    fake_llm.script(Reply(text="too late", delay=30))

    def scenario():
        child = started(chat_env(fake_llm, tmp_path))
        child.send("slow one\r")
        child.expect("slow one")
        while not fake_llm.requests:
            child.expect([pexpect.TIMEOUT], timeout=0.05)
        child.sendcontrol("c")
        child.expect("cancelled", timeout=10)
        child.expect("you>")
        child.send("quick one\r")
        child.expect("Tusk>")
        child.expect("you>")
        child.send("half a thought")
        child.sendcontrol("c")  # the first clears the line
        child.sendcontrol("c")  # the second, at an empty prompt, ends the chat
        return ended(child)

    code, rest = await in_pty(scenario)
    assert code == 0 and "Traceback" not in rest and len(fake_llm.requests) == 2
    session = (tmp_path / "data/chats/terminal/local/session.jsonl").read_text()
    assert "quick one" in session and "slow one" not in session and "too late" not in session


def test_history_is_private_even_with_a_loose_umask(tmp_path):
    """The input history file is made 0600 whatever the umask, and a symlink in its place is refused."""
    from channels.terminal.prompt import PrivateHistory
    from memory.paths import UnsafePathError

    old = os.umask(0)
    try:
        history = PrivateHistory(tmp_path / "input-history")
        history.store_string("one\ntwo")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "input-history").stat().st_mode) == 0o600
    assert list(history.load_history_strings()) == ["one\ntwo"]
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    try:
        PrivateHistory(tmp_path / "link")
    except UnsafePathError:
        pass
    else:
        raise AssertionError("a symlinked history file was followed")


async def test_forget_takes_the_input_history(tmp_path):
    """`/forget` lists what was typed at the terminal among the chat's files and deletes it with them."""
    from bot.events import ChatKey
    from bot.ops.admin import forget
    from memory.paths import ChatFiles
    from store.files.chats import FileChats

    files = ChatFiles.locate(tmp_path, "terminal", "local")
    files.ensure()
    files.input_history.write_text("\n# today\n+my secret plan\n")
    key = ChatKey("terminal", "local")
    assert "input-history" in await forget(FileChats(tmp_path), tmp_path, key, confirm=False)
    await forget(FileChats(tmp_path), tmp_path, key, confirm=True)
    assert not files.input_history.exists()


async def test_a_streamed_reply_is_shown_as_written_then_rendered(fake_llm, tmp_path):
    """At a terminal a long reply appears word by word, then is redrawn in its place rendered from Markdown."""
    words = " ".join(f"word{n}" for n in range(60))
    fake_llm.script(Reply(text=f"**Bold start** {words} the end.", token_delay=0.04))

    def scenario():
        child = started(chat_env(fake_llm, tmp_path))
        child.logfile_read = seen = io.StringIO()
        child.send("tell me a long story\r")
        child.expect("word5")  # part of the reply, while the rest is still being written
        child.expect("you>")
        child.expect(pexpect.TIMEOUT, timeout=1.5)  # the redrawn reply may follow the prompt (it is patched above it)
        child.sendcontrol("d")
        return seen.getvalue(), ended(child)

    shown, (code, _) = await in_pty(scenario)
    streamed = shown.index("**Bold start** word0")  # the reply as the model wrote it ...
    redrawn = shown[shown.index("\x1b[J", streamed):]  # ... cleared, and drawn again rendered
    assert code == 0
    assert "Bold start" in redrawn and "**" not in redrawn and "the end" in redrawn, repr(shown)
