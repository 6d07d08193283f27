"""The terminal chats of a running Tusk over its HTTP API (channels/http/terminal.py), and the client `tusk chat`
uses beside it (channels/terminal/remote.py), in one process: a TerminalChannel on plain text streams."""

import asyncio
import io

import pytest

from bot.access.api_keys import ApiKeys
from bot.errors import RemoteTuskError
from bot.events import ChatKey, InboundMessage, Injected
from channels.terminal import TerminalChannel
from channels.terminal.remote import RemoteTusk, server_events
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests import kept


def reminder(chat, text):
    """A due reminder as bot/tools/reminders.py publishes it: a turn nobody asked for."""
    return InboundMessage(ChatKey("terminal", chat), f"[reminder r1] {text}", sender_id="tusk",
                          injected=Injected("reminder", f"A reminder is due: {text}", f"Reminder: {text}"))


async def chat_through(app, chat, lines):
    """`tusk chat` down a pipe, talking through the running `app`: what it printed."""
    out = io.StringIO()
    remote = RemoteTusk(app.url, app.token, chat)
    terminal = TerminalChannel(chat, remote.publish, stdin=io.StringIO(lines), stdout=out, cancel=remote.cancel)
    async with remote.connected(terminal):
        await terminal.start()
        await terminal.run()
    return out.getvalue()


async def test_a_chat_through_the_running_tusk_is_its_terminal_chat(make_settings, fake_llm):
    """Lines sent through the API are turns of `terminal:<chat>` in the running Tusk, answered on the terminal as
    in a chat alone (a reply, a command); the session is that chat's."""
    fake_llm.script(Reply(text="hello from the running Tusk"))
    async with running(make_settings()) as app:
        printed = await chat_through(app, "work", "hi\n/status\n")
        saved = kept.on_disk(app, "terminal", "work").unconsolidated
    assert "Tusk> hello from the running Tusk" in printed and "Messages in this chat: 2" in printed
    assert [m.content for m in saved] == ["hi", "hello from the running Tusk"]


async def test_a_reply_nobody_asked_for_reaches_the_connected_terminal_or_waits(make_settings, fake_llm):
    """A reminder's reply goes to the terminal connected to its chat at once; with none connected, it is kept and
    the next one to connect gets it first; another chat's terminal never sees it."""
    fake_llm.responder = lambda body: Reply(text="reminder reply: " + body["messages"][-1]["content"][-12:])
    async with running(make_settings()) as app:
        base = f"{app.url}/v1/terminal"
        async with app.client.get(f"{base}/mine/events") as mine, app.client.get(f"{base}/other/events") as other:
            await app.bus.publish(reminder("mine", "water plants"))
            name, data = await anext(aiter(server_events(mine.content)))
            assert name == "message" and "water plants" in data["text"]
            await app.bus.publish(reminder("later", "call Bob"))  # nobody watches `later` yet
            await app.bus.publish(reminder("other", "sentinel"))
            name, data = await anext(aiter(server_events(other.content)))
            assert "sentinel" in data["text"] and "water plants" not in data["text"]
        async with app.client.get(f"{base}/later/events") as later:
            name, data = await anext(aiter(server_events(later.content)))
            assert name == "message" and "call Bob" in data["text"]


async def test_terminal_routes_are_the_owners_only(make_settings, fake_llm):
    """An API key of the OpenAI endpoint cannot reach the terminal chats; a bad chat id is a 400; a cancel with no
    turn under way says so."""
    async with running(make_settings()) as app:
        _, secret = ApiKeys(app.settings.home).create("terminal")
        keyed = {"Authorization": f"Bearer {secret}", "Origin": app.url}
        async with app.client.post(f"{app.url}/v1/terminal/x/messages", json={"text": "hi"}, headers=keyed) as resp:
            assert resp.status == 401
        async with app.client.post(f"{app.url}/v1/terminal/a%0Ab/messages", json={"text": "hi"}) as resp:
            assert resp.status == 400
        async with app.client.post(f"{app.url}/v1/terminal/x/cancel", json={}) as resp:
            assert resp.status == 200 and await resp.json() == {"cancelled": False}
        with pytest.raises(RemoteTuskError, match="refused"):
            async with RemoteTusk(app.url, "wrong-token", "x").connected(TerminalChannel("x", None)):
                pass
    assert fake_llm.requests == []


async def test_cancel_through_the_api_cancels_the_turn_there(make_settings, fake_llm):
    """The client's cancel (Ctrl-C) stops the turn in the running Tusk: its future ends cancelled, nothing is saved."""
    fake_llm.script(Reply(text="too late", delay=30))
    async with running(make_settings()) as app:
        out = io.StringIO()
        remote = RemoteTusk(app.url, app.token, "slow")
        terminal = TerminalChannel("slow", remote.publish, stdin=io.StringIO(""), stdout=out, cancel=remote.cancel)
        async with remote.connected(terminal):
            done = remote.publish(InboundMessage(ChatKey("terminal", "slow"), "take your time", "me"))
            await fake_llm.wait_for_requests(1)
            assert remote.cancel(ChatKey("terminal", "slow"))
            await asyncio.wait([done], timeout=10)
            assert done.cancelled()
        assert kept.on_disk(app, "terminal", "slow").unconsolidated == []
