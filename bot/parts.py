"""The builders TuskApp's wiring calls (bot/app.py): each makes one part from the settings, complete when it
is made, or stops Tusk at start with a ConfigError saying what to fix.

    store(settings)                     files, or PostgreSQL with its schema current (store/)
    model_profile(...)                  what is known of the model, read by all (bot/llm/profile.py)
    consolidator(...)                   the consolidation runner and its request (bot/consolidation.py)
    memory_tools(...)                   remember and search_history (bot/tools/memory.py)
    chat_tools / mcp_hub / skills       the tools only some chats get: web tools, MCP servers, skills
    needs / told / tokenizer_checked    a missing library, a store that cannot work, no tokenizer: said once
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from bot.config import Settings
from bot.consolidation import Consolidator
from bot.consolidation_call import ConsolidationCall
from bot.errors import ConfigError, StorageDown
from bot.events import ChatKey
from bot.llm import LLM
from bot.llm.learned import FILE, ModelBook
from bot.llm.profile import ModelProfile
from bot.skills.catalog import Catalog
from bot.skills.chats import SkillTools
from bot.tools.memory import MemoryTools
from bot.usage.prices import ModelChoice, configured_prices
from memory import tokens
from store import Store, open_store
from store.base import Chat, ChatSearch, ChatStore
from store.errors import StorageUnavailable, StoreSetupError

if TYPE_CHECKING:
    from bot.tools.mcp.hub import McpHub


@contextlib.contextmanager
def needs(extra: str, variable: str) -> Iterator[None]:
    """Turn a missing optional library into a ConfigError that says what to install."""
    try:
        yield
    except ImportError as exc:
        raise ConfigError(f"{variable} is set but the {extra} support is not installed ({exc.name} is missing): "
                          f"in Tusk's venv, from its clone: pip install '.[{extra}]'") from exc


def chat_tools(settings: Settings, mcp: McpHub | None, window: Callable[[], int]) -> Any:
    """The tools only some chats get: the web tools (bot/tools/web/) in front of the MCP servers; `window`:
    the tokens the model's window holds now (the web tools need room for a page)."""
    web = settings.web_settings()  # a search backend without its URL or key stops Tusk here, saying so
    if not web.any:
        return mcp
    from bot.tools.web.chats import WebTools
    from bot.tools.web.fetch import WebFetch
    from bot.tools.web.search import WebSearch

    fns: list[Callable[..., Awaitable[str]]] = [
        *([WebFetch(web, documents=settings.document_limits()).web_fetch] if web.fetch else []),
        *([WebSearch(web).web_search] if web.search != "off" else [])]
    return WebTools(web, fns, mcp, window)


def tokenizer_checked() -> None:
    """Fail at start, not in a chat, if token counting is impossible (the tokenizer itself is built later)."""
    try:
        tokens.check()
    except tokens.TokenizerUnavailable as exc:
        raise ConfigError(str(exc)) from exc


def model_profile(settings: Settings, model: str, models: Mapping[str, ModelChoice], store: Store) -> ModelProfile:
    """What is known of the model (window, tools, streaming, truncation, price): read by all, taught by its server
    through the LLM alone (bot/llm/profile.py) and kept in the store's shared models.json (bot/llm/learned.py);
    the window provisional until the warm-up settles it."""
    return ModelProfile(model, ModelBook(store.doc(FILE)), configured_window=settings.context_window,
                        max_reply_tokens=settings.max_reply_tokens, memory_max_tokens=settings.memory_max_tokens,
                        prices=configured_prices(models))


def memory_tools(settings: Settings, search: ChatSearch, lock_for: Callable[[ChatKey], asyncio.Lock],
                 memory_cap: Callable[[], int]) -> MemoryTools:
    """`remember` and `search_history` (bot/tools/memory.py): `lock_for`, the chat's memory lock (a round holds it
    too); `memory_cap()`, MEMORY.md's cap now (the model's profile)."""
    return MemoryTools(search, lock_for, memory_cap, notices=settings.memory_notices, bot_name=settings.bot_name,
                       default_zone=ZoneInfo(settings.timezone),
                       everyone_in_groups=settings.group_remember == "everyone")  # TUSK_GROUP_REMEMBER


def skills(settings: Settings, inner: Any, window: Callable[[], int], takes_tools: Callable[[], bool]) -> SkillTools:
    """The owner's playbooks (bot/skills/): read_skill and the prompt's Skills section, for chats that have skills,
    in front of `inner` (the web tools, the MCP servers); none for a model without tools (no read_skill)."""
    skill_settings = settings.skill_settings()
    made = SkillTools(skill_settings, Catalog(skill_settings.roots), inner, window, tools_available=takes_tools)
    made.catalog.snapshot()  # read once at start: a bad skill is logged now, not at the first turn
    return made


def mcp_hub(settings: Settings) -> McpHub | None:
    """The MCP servers of mcp.json, or None without any (the SDK is then not even imported)."""
    servers = settings.mcp_servers()  # a bad mcp.json stops Tusk here, naming the problem
    if not servers:
        return None
    from bot.tools.mcp.hub import McpHub

    return McpHub(servers, settings.mcp_settings())


@contextlib.contextmanager
def told() -> Iterator[None]:
    """The store's errors said as Tusk's: a setting that cannot work is a ConfigError (one line naming
    TUSK_DATABASE_URL), a database that does not answer StorageDown."""
    try:
        yield
    except StoreSetupError as exc:
        raise ConfigError(str(exc)) from None
    except StorageUnavailable as exc:
        raise StorageDown(str(exc)) from None


def store(settings: Settings) -> Store:
    """What Tusk keeps (store/): files under TUSK_HOME, or PostgreSQL when TUSK_DATABASE_URL is set, the
    database's schema brought up to date first: the parts made after it read shared documents at once."""
    url = settings.database_url.get_secret_value() if settings.database_url else None
    opened = open_store(settings.home, url)
    with told():
        opened.prepare()
    return opened


async def started(store: Store) -> None:
    """`store` started (the database reached, its pool open), or one line saying why not."""
    with told():
        await store.start()


def consolidator(settings: Settings, chats: ChatStore, llm: LLM, profile: ModelProfile,
                 instructions_for: Callable[[Chat], str]) -> Consolidator:
    """The consolidation runner (bot/consolidation.py), its request sent through `llm` (bot/consolidation_call.py)
    and its figures read from `profile` when used; background rounds wait for the chat turns, and on a one-slot
    server yield to them (bot/llm/slots.py); `instructions_for`: a chat's open items, with check-ins on."""
    call = ConsolidationCall(llm, settings.consolidation_model)
    return Consolidator(chats, call, lambda: profile.budget, lambda: profile.memory_cap,
                        tools_available=call.takes_tools, idle=llm.slots.quiet, instructions_for=instructions_for)
