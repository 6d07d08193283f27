"""Three members in a group on Discord's and Slack's fakes: speakers named, facts by person, /listen, /forget me."""

import pytest

from tests.fakes.fake_discord import MANAGE_MESSAGES  # noqa: F401 (the roles below carry it)
from tests.fakes.fake_llm import attributing_responder
from tests.legality import violations
from tests.test_discord import dc, start_tusk  # noqa: F401 (fixtures)
from tests.test_slack import running, settings, slack  # noqa: F401 (fixtures)
from tests import kept


def legal(fake_llm):
    return all(not violations(r["messages"]) for r in fake_llm.requests)


def user_turns(fake_llm):
    return [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]


@pytest.fixture
async def discord_group(start_tusk, dc, fake_llm):  # noqa: F811
    fake_llm.responder = attributing_responder
    dc.carol = dc.add_user("carol")
    app = await start_tusk()

    async def say(author, text, addressed=True, **extra):
        before = len(dc.sent)
        await dc.message(dc.channel, author, f"{dc.mention} {text}" if addressed else text, guild=dc.guild, **extra)
        if addressed:
            await dc.wait_for(lambda: len(dc.sent) > before)
            return dc.sent[-1]["content"]

    return app, say


async def test_discord_group_remembers_who_said_what(discord_group, dc, fake_llm):
    """On Discord: speakers named in the history, facts in per-person sections, chatter kept with /listen on,
    and /forget me takes one member out of every file."""
    app, say = discord_group
    await say(dc.alice, "my drink is mint-tea-7a1")
    await say(dc.bob, "my drink is espresso-8b2")
    await say(dc.carol, "my drink is lemonade-9c3")
    assert user_turns(fake_llm)[:2] == ["Alice: my drink is mint-tea-7a1", "Bob: my drink is espresso-8b2"]
    assert "Listening: on" in await say(dc.carol, "/listen on", roles=(dc.mods,))
    calls = len(fake_llm.requests)
    await say(dc.alice, "my pet is gecko-7d4", addressed=False)
    files = kept.files(app, "discord", dc.channel)
    await dc.wait_for(lambda: "gecko-7d4" in files.session.read_text())
    assert len(fake_llm.requests) == calls
    await say(dc.bob, "/new")
    memory = files.memory.read_text()
    assert "## Alice\n\n- drink: mint-tea-7a1\n- pet: gecko-7d4" in memory and "## Carol\n\n- drink: lemonade-9c3" in memory
    assert "Forgotten Alice" in await say(dc.alice, "/forget me confirm")
    for path in files.dir.rglob("*"):
        if path.is_file():
            assert "7a1" not in path.read_text() and "gecko" not in path.read_text(), path
    assert "espresso-8b2" in files.memory.read_text() and legal(fake_llm)


async def test_slack_group_remembers_who_said_what(settings, slack, fake_llm):  # noqa: F811
    """On Slack (a channel as one chat): speakers named, facts by person, /listen on keeps chatter, /forget me."""
    fake_llm.responder = attributing_responder
    s = settings(SLACK_THREAD_SESSIONS="false")
    async with running(s) as (app, _):
        async def say(user, text):
            before = len(slack.posted)
            await slack.send_event(slack.mention(text, user=user))
            await slack.wait_for(lambda: len(slack.posted) > before)
            return slack.posted[-1]["text"]

        await say("U0ANN", "my drink is mint-tea-7a1")
        await say("U0BOSS", "my drink is espresso-8b2")
        await say("U0CAROL", "my drink is lemonade-9c3")
        assert user_turns(fake_llm)[:2] == ["ann: my drink is mint-tea-7a1", "boss: my drink is espresso-8b2"]
        assert "only its administrators" in await say("U0ANN", "/listen on")
        assert "Listening: on" in await say("U0BOSS", "/listen on")
        calls, files = len(fake_llm.requests), kept.files(app, "slack", "C0GENERAL")
        ts = slack.next_ts()
        await slack.send_event({"type": "message", "channel_type": "channel", "channel": "C0GENERAL",
                                "user": "U0CAROL", "text": "my pet is newt-9k4", "ts": ts, "event_ts": ts,
                                "team": slack.team_id})
        await slack.wait_for(lambda: files.session.exists() and "newt-9k4" in files.session.read_text())
        assert len(fake_llm.requests) == calls
        await say("U0BOSS", "/new")
        memory = files.memory.read_text()
        assert "## carol\n\n- drink: lemonade-9c3\n- pet: newt-9k4" in memory and "## ann\n\n- drink: mint-tea-7a1" in memory
        assert "Forgotten ann" in await say("U0ANN", "/forget me confirm")
        for path in files.dir.rglob("*"):
            if path.is_file():
                assert "mint-tea" not in path.read_text(), path
        assert "newt-9k4" in files.memory.read_text() and legal(fake_llm)
