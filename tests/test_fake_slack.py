"""The fake Slack behaves as Slack does where Tusk depends on it: tokens, Socket Mode, signatures, response_url."""

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.fake_slack import RESPONSE_URL_USES, FakeSlack, shown


@pytest.fixture
async def slack():
    async with FakeSlack() as fake:
        yield fake


async def test_web_api_checks_the_token_type(slack):
    """The bot token works for chat.postMessage; a wrong token or the app token is refused as Slack refuses it."""
    async with aiohttp.ClientSession() as session:
        ok = AsyncWebClient(slack.bot_token, base_url=slack.api_url, session=session)
        assert (await ok.chat_postMessage(channel="C1", text="hi"))["ts"] == slack.posted[0]["ts"]
        for token, error in (("xoxb-nope", "invalid_auth"), (slack.app_token, "not_allowed_token_type")):
            with pytest.raises(SlackApiError) as info:
                await AsyncWebClient(token, base_url=slack.api_url, session=session).chat_postMessage(channel="C1",
                                                                                                      text="x")
            assert info.value.response["error"] == error
        with pytest.raises(SlackApiError, match="not_allowed_token_type"):
            await ok.apps_connections_open(app_token=slack.bot_token)


async def test_socket_mode_url_needs_a_ticket_and_says_hello(slack):
    """apps.connections.open gives a websocket URL that greets with `hello`; a made-up ticket is refused."""
    async with aiohttp.ClientSession() as session:
        client = AsyncWebClient(slack.bot_token, base_url=slack.api_url, session=session)
        url = (await client.apps_connections_open(app_token=slack.app_token))["url"]
        async with session.ws_connect(url) as ws:
            assert (await ws.receive_json())["type"] == "hello"
            envelope = await slack.send_event(slack.dm("hi"))
            sent = await ws.receive_json()
            assert sent["envelope_id"] == envelope and sent["payload"]["event"]["text"] == "hi"
            await ws.send_json({"envelope_id": envelope})
            assert await slack.wait_acked(envelope) is None
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await session.ws_connect(url.replace("ticket=", "ticket=x"))


async def test_deliveries_are_signed_with_the_signing_secret(slack):
    """HTTP deliveries carry a v0 signature that slack_sdk's verifier accepts, and a forged one it rejects."""
    body = b'{"type": "event_callback"}'
    good, bad = slack.sign(body), slack.sign(body, secret="other")
    verifier = SignatureVerifier(slack.signing_secret)
    assert verifier.is_valid(body, good["X-Slack-Request-Timestamp"], good["X-Slack-Signature"])
    assert not verifier.is_valid(body, bad["X-Slack-Request-Timestamp"], bad["X-Slack-Signature"])


async def test_response_url_takes_five_posts(slack):
    """A slash command's response_url accepts five answers, then says used_url."""
    url = slack.command_payload("/status")["response_url"]
    async with aiohttp.ClientSession() as session:
        statuses = []
        for _ in range(RESPONSE_URL_USES + 1):
            async with session.post(url, json={"text": "hi", "response_type": "ephemeral"}) as resp:
                statuses.append(resp.status)
    assert statuses == [200] * RESPONSE_URL_USES + [404] and len(slack.responses) == RESPONSE_URL_USES


async def test_reactions_are_tracked_like_slack(slack):
    """Adding a reaction twice is already_reacted; removing one that is not there is no_reaction."""
    async with aiohttp.ClientSession() as session:
        client = AsyncWebClient(slack.bot_token, base_url=slack.api_url, session=session)
        await client.reactions_add(channel="D1", timestamp="1.2", name="eyes")
        with pytest.raises(SlackApiError, match="already_reacted"):
            await client.reactions_add(channel="D1", timestamp="1.2", name="eyes")
        await client.reactions_remove(channel="D1", timestamp="1.2", name="eyes")
        with pytest.raises(SlackApiError, match="no_reaction"):
            await client.reactions_remove(channel="D1", timestamp="1.2", name="eyes")
    assert not slack.reacted


def test_shown_reads_slack_text_as_a_client_shows_it():
    """Control sequences show their label (an unescaped `<word>` loses its brackets), entities are unescaped, and
    mrkdwn's emphasis and quote markers go unless the post turned mrkdwn off; lists are never renumbered."""
    text = "3. a *b* _c_ ~d~ `e` &lt;p&gt; <p> <https://x.io|docs> <@U1|ann>\n&gt; q\n5. f"
    assert shown(text) == "3. a b c d e <p> p docs ann\nq\n5. f"
    assert shown(text, mrkdwn=False) == "3. a *b* _c_ ~d~ `e` <p> p docs ann\n> q\n5. f"
