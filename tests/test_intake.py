"""The intake chain (channels/intake.py) on its own: what every platform adapter gets from it, whatever the
platform. The platform side is a small recording channel; the adapters' own tests (test_telegram*,
test_discord*, test_slack*) drive the same chain through the real libraries and fake servers."""

import asyncio
import dataclasses
import json

import pytest

from bot import stores
from bot.access.pairing import PairingStore
from bot.events import ChatKey, InboundMessage, OutboundMessage, ReplyRef, TurnResult
from channels.base import Access, Done
from channels.intake import Arrival, Intake

KEY = ChatKey("test", "-100")


class Recorder:
    """A platform channel that records what the chain asks of it."""

    name = "test"
    draft = None
    voice = None

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []
        self.typing_for: list[int] = []
        self.typing_ended: list[int] = []

    async def send(self, msg: OutboundMessage) -> None:
        self.sent.append(msg)

    async def typing(self, msg: InboundMessage, done: Done) -> None:
        self.typing_for.append(msg.id)
        await asyncio.wait([done])
        self.typing_ended.append(msg.id)


class Bus:
    """`publish` as the bus offers it: the message kept, a future resolved when told its turn is done."""

    def __init__(self) -> None:
        self.published: list[InboundMessage] = []
        self.done: dict[int, Done] = {}

    def publish(self, msg: InboundMessage) -> Done:
        self.published.append(msg)
        self.done[msg.id] = asyncio.get_running_loop().create_future()
        return self.done[msg.id]


def chain(policy="allowlist", allow=frozenset(), pairing=None, seen=None):
    channel, bus = Recorder(), Bus()
    access = Access(policy, pairing)
    allowed = access.allow_list(allow, "TEST_ALLOW_FROM", "test")
    return Intake("Test", channel, allowed, bus.publish, seen=seen), channel, bus


@pytest.fixture
def kept_in(store_backend, tmp_path, request):
    """The store the chain's shared parts are kept in (the seen ids, pairing.json): a files home, or a fresh
    database (tests marked both_stores run on each)."""
    from store import prepared

    url = request.getfixturevalue("pg_url") if store_backend == "postgres" else None
    (tmp_path / "home").mkdir(mode=0o700)  # as a running Tusk has made it
    with prepared(tmp_path / "home", url) as store:
        yield store


def message(text="hello", sender="7", addressed=True, **fields) -> InboundMessage:
    return InboundMessage(KEY, text, sender_id=sender, is_group=True, addressed=addressed, **fields)


async def test_a_refused_sender_costs_no_file_lookup_or_publish():
    """A sender outside the allow-list: its files are never asked for, no lookup runs, nothing is published."""
    intake, _, bus = chain(allow=frozenset({"1"}))
    asked = []

    async def lookup(msg):
        asked.append("lookup")
        return msg

    await intake.take(Arrival(message(), "m1", files=lambda: asked.append("files") or [], lookup=lookup))
    await intake.drain()
    assert (asked, bus.published) == ([], [])


@pytest.mark.both_stores
async def test_a_message_delivered_twice_is_published_once(kept_in):
    """The same platform id taken twice (a retry, a replay) is published once, also when it comes again to a
    process started after the one that took it (the ids are kept in the store)."""
    intake, _, bus = chain(allow=frozenset({"7"}), seen=stores.seen(kept_in))
    await intake.take(Arrival(message("one"), "m1"))
    await intake.take(Arrival(message("one again"), "m1"))
    await intake.take(Arrival(message("two"), "m2"))
    await intake.drain()
    assert [m.text for m in bus.published] == ["one", "two"]
    restarted, _, bus = chain(allow=frozenset({"7"}), seen=stores.seen(kept_in))
    await restarted.take(Arrival(message("two, redelivered"), "m2"))
    await restarted.take(Arrival(message("three"), "m3"))
    await restarted.drain()
    assert [m.text for m in bus.published] == ["three"]


async def test_typing_is_shown_until_the_turn_is_done_and_never_for_chatter():
    """An addressed message shows typing until its turn is done; group chatter not for the bot shows none."""
    intake, channel, bus = chain(allow=frozenset({"7"}))
    chatter, asked = message("just talking", addressed=False), message("@bot hi")
    await intake.take(Arrival(chatter, "m1"))
    await intake.take(Arrival(asked, "m2"))
    await intake.drain()
    await asyncio.sleep(0)  # the typing task starts
    assert channel.typing_for == [asked.id] and channel.typing_ended == []
    bus.done[asked.id].set_result(TurnResult())
    await intake.aclose(grace=1)
    assert channel.typing_ended == [asked.id]


@pytest.mark.both_stores
async def test_the_gate_waits_for_the_chats_earlier_work(kept_in):
    """While a chat's earlier work runs (a group's approval moving with it), its next message's allow-list
    check waits for it, and so sees the approval (kept in the store's pairing.json)."""
    pairing = PairingStore(kept_in.doc("pairing.json"))
    intake, channel, bus = chain("pairing", pairing=pairing)
    request, _ = pairing.request("test", "group", "-100", "Hikers")
    release = asyncio.Event()

    async def approve_later() -> None:
        await release.wait()
        pairing.approve(request.code)

    intake.order.run(KEY, approve_later)
    await intake.take(Arrival(message(), "m1", group="-100"))
    release.set()
    await intake.drain()
    assert [m.text for m in bus.published] == ["hello"] and channel.sent == []


@pytest.mark.both_stores
async def test_a_stranger_is_told_a_code_once_and_nothing_is_published(kept_in):
    """With pairing, an unknown sender's message is not published; the code is told in the chat, once (the
    pending code kept in the store's pairing.json)."""
    intake, channel, bus = chain("pairing", pairing=PairingStore(kept_in.doc("pairing.json")))
    await intake.take(Arrival(message(sender="9"), "m1"))
    await intake.take(Arrival(message(sender="9"), "m2"))
    await intake.drain()
    assert bus.published == [] and len(channel.sent) == 1
    assert "tusk pairing approve" in channel.sent[0].text and channel.sent[0].verbatim


def test_a_reply_ref_survives_json():
    """A ReplyRef is plain fields: it goes through JSON and comes back equal (any process can send by it)."""
    ref = ReplyRef(message="1712.5", thread="1712.1", interaction="tok", ephemeral=True, team="T1")
    assert ReplyRef(**json.loads(json.dumps(dataclasses.asdict(ref)))) == ref
    answer = OutboundMessage.answer(message(ref=ref), "ok")
    assert answer.ref == ref and answer.key == KEY
