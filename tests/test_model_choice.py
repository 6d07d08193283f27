"""/model: a chat picks one of the owner's TUSK_MODELS; only that chat's requests go to it."""

import pytest

from bot.commands import CommandContext
from bot.commands.model import model_command
from bot.events import ChatKey
from bot.llm.choice import ModelChoices
from store import open_files
from tests.conftest import running

pytestmark = pytest.mark.both_stores

MODELS = "fast=openai/fast-model,big=openai/big-model@3/15"


async def test_model_switches_this_chat_only_and_survives_a_restart(make_settings, fake_llm):
    """/model big sends that chat's requests to the big model; another chat stays on TUSK_MODEL; the pick is
    kept in the chat's settings across a restart; /model default goes back."""
    settings = make_settings(TUSK_MODELS=MODELS)
    async with running(settings) as tusk:
        listing = (await tusk.say("m1", "/model"))[0]
        assert "the default (openai/fake-model)" in listing and "- big: openai/big-model" in listing
        assert (await tusk.say("m1", "/model big"))[0].startswith("This chat now uses big")
        await tusk.say("m1", "hello")
        await tusk.say("m2", "hello")
    assert [b["model"] for b in fake_llm.requests] == ["big-model", "fake-model"]
    async with running(settings) as tusk:
        await tusk.say("m1", "again")
        assert "uses big (openai/big-model)" in (await tusk.say("m1", "/model"))[0]
        await tusk.say("m1", "/model default")
        await tusk.say("m1", "back")
    assert [b["model"] for b in fake_llm.requests[2:]] == ["big-model", "fake-model"]


async def test_a_model_not_on_the_list_is_refused_with_the_list(make_settings, fake_llm):
    """/model gpt-9 names the models this chat may use and changes nothing."""
    async with running(make_settings(TUSK_MODELS=MODELS)) as tusk:
        answer = (await tusk.say("m3", "/model gpt-9"))[0]
        await tusk.say("m3", "hi")
    assert "no model 'gpt-9'" in answer and "- fast: openai/fast-model" in answer
    assert fake_llm.requests[-1]["model"] == "fake-model"


async def test_in_a_group_only_admins_switch(tmp_path):
    """A group member who is not an admin cannot switch the chat's model."""
    chats, key = open_files(tmp_path).chats, ChatKey("slack", "C1")
    choices = ModelChoices("openai/a", {"b": "openai/b"})
    ctx = CommandContext(key, await chats.open(key), chats, "openai/a", may_erase=False, is_group=True)
    assert "only its administrators" in await model_command(choices).fn(ctx, "b")
    assert choices.for_chat((await chats.open(key)).prefs) == "openai/a"


async def test_the_chats_model_prices_its_usage(make_settings, fake_llm):
    """Usage of a chat on a priced TUSK_MODELS model is costed at that model's price."""
    from tests.fakes.fake_llm import Reply
    from tests.test_usage_turns import usage

    fake_llm.responder = lambda body: Reply(text="ok", usage=usage(1_000_000, 100_000))
    async with running(make_settings(TUSK_MODELS=MODELS)) as tusk:
        await tusk.say("m4", "/model big")
        await tusk.say("m4", "hello")
        (row,) = tusk.ledger._rows("SELECT purpose, channel, chat, person, input_tokens, output_tokens, cached_tokens,"
                                   f" estimated, cost_usd, cost_source FROM {tusk.ledger.table} ORDER BY id", [])  # the app's ledger
    assert row[8:] == (4.5, "configured")  # $3 per million in, $15 per million out
