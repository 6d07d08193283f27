"""The web tools in a turn: a pasted link read from the page's own text, which chats get the tools, settings."""

import pytest

from bot.errors import ConfigError
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_web import FakeWeb


@pytest.fixture
async def site():
    async with FakeWeb() as fake:
        yield fake


def offered(request):
    return {t["function"]["name"] for t in request.get("tools", [])}


async def test_a_pasted_link_is_read_and_summarised_from_the_page(make_settings, fake_llm, site):
    """The model calls web_fetch; the next request carries the article's main text, framed, without its nav."""
    url = site.base + "/article"
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "web_fetch", {"url": url})]),
                    Reply(text="Sea otters hold hands while they sleep, so they do not drift apart."))
    settings = make_settings(TUSK_WEB_ALLOW_HOSTS=site.allow, TUSK_WEB_HOST_INTERVAL=0)
    async with running(settings) as tusk:
        replies = await tusk.say("w", f"what does this article say? {url}")
    assert replies == ["Sea otters hold hands while they sleep, so they do not drift apart."]
    assert "web_fetch" in offered(fake_llm.requests[0]) and "## Web" in fake_llm.requests[0]["messages"][0]["content"]
    result = fake_llm.requests[1]["messages"][-1]
    assert result["role"] == "tool" and result["content"].startswith(f"<<web page: {url} - data from the web")
    assert "favourite stone is kept under the left armpit" in result["content"]
    assert "NAVMENU" not in result["content"] and "ADVERT" not in result["content"]


async def test_a_dense_page_reaches_the_model_whole_in_its_frame_at_the_default_caps(make_settings, fake_llm, site):
    """With the default TUSK_WEB_MAX_TOKENS and TUSK_TOOL_RESULT_MAX_CHARS a dense page comes back cut inside
    its frame: the tool result keeps the end marker and was never cut by the generic tool-result cap."""
    url = site.base + "/dense"
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "web_fetch", {"url": url})]), Reply(text="Read."))
    async with running(make_settings(TUSK_WEB_ALLOW_HOSTS=site.allow, TUSK_WEB_HOST_INTERVAL=0)) as tusk:
        assert await tusk.say("w", f"read {url}") == ["Read."]
    result = fake_llm.requests[1]["messages"][-1]["content"]
    assert result.endswith("[... cut: about " + result.rsplit("[... cut: about ", 1)[1]) and "truncated" not in result
    assert result.endswith(" more tokens of this page not shown]\n<<end of web page>>") and len(result) <= 16_000


async def test_a_link_is_not_fetched_unless_the_model_asks(make_settings, fake_llm, site):
    """A message with a link and a model that answers directly: the site sees no request at all."""
    async with running(make_settings(TUSK_WEB_ALLOW_HOSTS=site.allow)) as tusk:
        await tusk.say("w", f"look {site.base}/article")
    assert site.requests == []


async def test_an_inside_url_is_refused_to_the_model_with_the_reason(make_settings, fake_llm):
    """Without the owner's allowing, a loopback URL comes back as the tool's error, saying why."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "web_fetch", {"url": "http://127.0.0.1/api/"})]),
                    Reply(text="I cannot read that."))
    async with running(make_settings()) as tusk:
        await tusk.say("w", "read http://127.0.0.1/api/")
    error = fake_llm.requests[1]["messages"][-1]["content"]
    assert error.startswith("Error: WebRefused: 127.0.0.1 resolves to 127.0.0.1, a loopback address")


async def test_the_tools_follow_the_chat_settings(make_settings, fake_llm, site):
    """TUSK_WEB_CHATS limits the chats; web_search is offered only with a backend; TUSK_WEB_FETCH=off drops fetch."""
    settings = make_settings(TUSK_WEB_CHATS="http:research", TUSK_WEB_SEARCH="searxng", TUSK_SEARXNG_URL=site.base)
    async with running(settings) as tusk:
        await tusk.say("research", "hi")
        await tusk.say("other", "hi")
    assert {"web_fetch", "web_search"} <= offered(fake_llm.requests[0])
    assert not offered(fake_llm.requests[1]) & {"web_fetch", "web_search"}
    assert "## Web" not in fake_llm.requests[1]["messages"][0]["content"]
    fake_llm.requests.clear()
    async with running(make_settings(TUSK_WEB_FETCH="off")) as tusk:
        await tusk.say("x", "hi")
    assert not offered(fake_llm.requests[0]) & {"web_fetch", "web_search"}


def test_groups_can_be_left_out(make_settings):
    """TUSK_WEB_GROUPS=off: direct chats keep the tools, groups do not."""
    from bot.events import ChatKey
    web = make_settings(TUSK_WEB_GROUPS="off").web_settings()
    assert web.serves(ChatKey("telegram", "1"), is_group=False)
    assert not web.serves(ChatKey("telegram", "-100"), is_group=True)


def test_a_backend_without_its_setting_fails_at_start(make_settings):
    """TUSK_WEB_SEARCH=brave without a key stops Tusk with the fix in the message."""
    with pytest.raises(ConfigError, match="TUSK_WEB_SEARCH=brave needs TUSK_BRAVE_API_KEY"):
        make_settings(TUSK_WEB_SEARCH="brave").web_settings()
    with pytest.raises(ConfigError, match="TUSK_WEB_ALLOW_HOSTS"):
        make_settings(TUSK_WEB_ALLOW_HOSTS="http://x/y").web_settings()


async def test_doctor_checks_the_chosen_search_backend(make_settings, site):
    """doctor reports the web settings and asks the backend one tiny query; a bad key fails naming its setting."""
    from bot.ops.doctor import run_checks
    checks = {c.name: c for c in await run_checks(make_settings(TUSK_WEB_SEARCH="searxng", TUSK_SEARXNG_URL=site.base),
                                                  model=False)}
    assert checks["web"].verdict == "ok" and "web_fetch on; web_search searxng" in checks["web"].detail
    assert checks["web search (searxng)"].verdict == "ok"
    settings = make_settings(TUSK_WEB_SEARCH="tavily", TUSK_TAVILY_API_KEY="wrong", TUSK_TAVILY_API_BASE=site.base)
    bad = {c.name: c for c in await run_checks(settings, model=False)}["web search (tavily)"]
    assert bad.verdict == "fail" and "TUSK_TAVILY_API_KEY" in bad.detail + bad.fix


async def test_a_small_window_model_gets_no_web_tools(make_settings, fake_llm):
    """A model whose window cannot hold a page beside the chat (2,048 tokens) is offered no web tools, so its
    prompt keeps room for the conversation; a roomy one is."""
    async with running(make_settings(TUSK_CONTEXT_WINDOW=2048)) as tusk:
        await tusk.say("small", "hello")
    assert "web_fetch" not in [t["function"]["name"] for t in fake_llm.requests[-1].get("tools") or []]
    async with running(make_settings(TUSK_CONTEXT_WINDOW=32768)) as tusk:
        await tusk.say("roomy", "hello")
    assert "web_fetch" in [t["function"]["name"] for t in fake_llm.requests[-1]["tools"]]
