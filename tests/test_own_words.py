"""Tusk's own words (`OutboundMessage.verbatim`: a command's answer, a notice) shown as written where they are
cut, escaped and drawn: channels/split.py, Discord's and Slack's pieces, the HTTP API's `formats`, the terminal.
Each platform's end-to-end check is with its own tests (test_telegram.py, test_slack.py, test_discord.py)."""

import asyncio
import io
import json
import re

import pexpect

from channels.discord_bot.text import MAX_TEXT, pieces
from channels.slack.format import LIMIT, split_for_slack
from channels.split import split_message
from channels.terminal import TerminalChannel
from memory.paths import ChatFiles
from tests import procs
from tests.fakes.fake_discord import shown as discord_shows
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import shown as slack_shows
from tests.own_words import ANSWERS, PERSONA, PERSONA_ANSWER, WHY, WHY_ANSWER, seed
from tests.test_cli import env_for
from tests import kept

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
LONG = "\n".join(f"{n}. fact {n} *starred* with <tag> and\n  (its source, indented)" for n in range(3, 400, 2))


def rejoined(parts: list[str]) -> str:
    """The pieces of a cut text put back at their cuts (each was cut at a line break)."""
    return "\n".join(parts)


def test_a_verbatim_text_is_cut_without_fences_and_the_next_line_keeps_its_indentation():
    """No fence is closed or reopened in Tusk's own text, and the line after a cut keeps its leading spaces."""
    text = "```\n" + LONG  # a fence in Tusk's own text is just characters
    parts = split_message(text, 500, verbatim=True)
    assert len(parts) > 10 and all(len(p) <= 500 for p in parts)
    assert rejoined(parts) == text and not any("```" in p for p in parts[1:])
    assert split_message("a" * 30 + "\n  (indented) " + "b" * 30, 45, verbatim=True) == \
        ["a" * 30, "  (indented) " + "b" * 30]


def test_discord_pieces_of_tusks_words_fit_once_escaped_and_read_as_written():
    """Each escaped piece is within Discord's 2,000 characters and shows its own part of the text exactly."""
    parts = pieces(LONG, verbatim=True)
    assert len(parts) > 3 and all(len(p) <= MAX_TEXT for p in parts)
    assert rejoined([discord_shows(p) for p in parts]) == LONG
    assert discord_shows(LONG) != LONG  # unescaped, Discord would renumber the list and eat the asterisks


def test_slack_pieces_of_tusks_words_are_escaped_not_converted():
    """Each piece is within 3,000 characters escaped; with mrkdwn off Slack shows it exactly as written."""
    parts = split_for_slack(LONG * 3, verbatim=True)
    assert len(parts) > 3 and all(len(p) <= LIMIT for p in parts) and all("<tag>" not in p for p in parts)
    assert rejoined([slack_shows(p, mrkdwn=False) for p in parts]) == LONG * 3


class Tty(io.StringIO):
    """A terminal's stream, as the terminal chat sees one: rich draws on it."""

    def isatty(self) -> bool:
        return True


def drawn(verbatim: bool, text: str, monkeypatch) -> str:
    """What the terminal chat draws for one reply, its colours taken away."""
    monkeypatch.setenv("COLUMNS", "200")
    out = Tty()

    async def publish(msg):
        raise AssertionError("nothing is published here")

    TerminalChannel("local", publish, stdin=Tty(), stdout=out).show(text, verbatim)
    return ANSI.sub("", out.getvalue())


def test_the_terminal_draws_tusks_words_as_written_and_the_models_as_markdown(monkeypatch):
    """At a terminal a command's answer keeps 3 and 5, its line breaks and `*strong*`; the same text from the
    model is rendered from Markdown (a list, so 3 and 4; emphasis without asterisks)."""
    own = drawn(True, WHY_ANSWER, monkeypatch)
    assert [line.rstrip() for line in own.split("\n")] == ["Tusk>", *WHY_ANSWER.split("\n"), "", ""]
    assert PERSONA_ANSWER in drawn(True, PERSONA_ANSWER, monkeypatch)
    model = drawn(False, WHY_ANSWER, monkeypatch)
    assert re.search(r"^ *4\.? Ann buys her tea", model, re.MULTILINE) and not re.search(r"^ *5\.? Ann", model, re.M)
    assert "*strong*" not in model and "\n  (no record" not in model  # emphasis rendered, the source line run on


async def test_the_http_api_says_which_replies_are_tusks_own(tusk, fake_llm):
    """`formats` names each reply "plain" (a command's answer) or "markdown" (the model's), in the JSON answer and
    in a stream's `done`; `replies` is as before, so older clients keep working."""
    seed(kept.files(tusk, "http", "me"))
    fake_llm.script(Reply(text="**Hi** there"))
    url = f"{tusk.url}/v1/chats/me/messages"
    answers = []
    for text in (WHY, "hello"):
        async with tusk.client.post(url, json={"text": text}) as resp:
            answers.append(await resp.json())
    async with tusk.client.post(url, json={"text": PERSONA, "stream": True}) as resp:
        events = [block.split("\n") for block in (await resp.text()).strip().split("\n\n")]
    assert answers == [{"replies": [WHY_ANSWER], "formats": ["plain"]},
                       {"replies": ["**Hi** there"], "formats": ["markdown"]}]
    assert [(name, json.loads(data[6:])) for name, data in events] == \
        [("event: done", {"replies": [PERSONA_ANSWER], "formats": ["plain"]})]


async def test_tusk_chat_shows_command_answers_as_written(fake_llm, tmp_path):
    """In `tusk chat` at a real terminal, `/memory why tea` reads 3 and 5 under each other with their source
    lines and `*strong*`, and `/persona` keeps its `<...>` placeholder."""
    seed(ChatFiles.locate(tmp_path / "data", "terminal", "local"))
    env = env_for(fake_llm, tmp_path, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")

    def scenario():
        child = procs.spawn_tusk("chat", env=env, timeout=180)  # the first answer waits for the tokenizer (litellm's
        # import: ~15 s on a busy 2-core machine, minutes when it is very busy)
        child.expect("you>")
        child.logfile_read = seen = io.StringIO()
        for command, last_words, times in ((WHY, "erased)", 2), (PERSONA, "here>.", 1)):
            child.send(command + "\r")
            for _ in range(times):  # the answer's lines that end so (one per fact in /memory why's)
                child.expect_exact(last_words)
        child.expect_exact("you>")  # Ctrl-D at the prompt (typed while the answer prints, the terminal eats it)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        child.close()
        return ANSI.sub("", seen.getvalue()).replace("you>", "")  # the prompt, redrawn wherever the answer's
        # lines happen to be at the time (a busy machine): what matters is the answer's own lines

    shown = await asyncio.to_thread(scenario)
    lines = [line.rstrip() for line in shown.split("\n")]
    for answer in ANSWERS:
        first = answer.split("\n")[0]
        at = lines.index(first)
        assert lines[at:at + answer.count("\n") + 1] == answer.split("\n"), shown
    assert not fake_llm.requests
