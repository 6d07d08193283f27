"""`tusk doctor`'s look at the model: one tiny request with one tool, then what the server says of itself.

    provider      litellm can tell where the model goes (a name without its route, `llama3`, is said so)
    reachable     how long one short answer took (litellm's import, seconds on a first call, timed apart)
    tools         the model called the offered tool, answered in text, or the server refused tools
    reasoning     a reasoning field came back (DeepSeek, Qwen, OpenRouter ...): Tusk stores and sends it back
    window        the tokens Tusk budgets for and where that figure came from (bot/llm/window.py)
    local server  (a base URL on this machine) its models, and whether it cuts long prompts: a prompt of
                  known size against the `usage.prompt_tokens` it reports
    price         what a call costs (litellm's table, or the owner's TUSK_MODELS price); an unknown price
                  counts tokens against the token limits instead of dollars (bot/ops/doctor.py's spend
                  limits check says which dollar limits cannot count it)

Each probe request is recorded as purpose "probe" in the usage ledger of the configured store
(bot/ops/own_calls.py): usage.sqlite when the data dir exists (the doctor never creates it), or the
database's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from ipaddress import ip_address
from urllib.parse import urlparse

from bot.config import Settings
from bot.errors import (ConfigError, LLMAuthFailed, LLMError, LLMUnreachable, ModelNotFound, NotAModelServer,
                        ToolsUnsupported)
from bot.llm import LLM, LLMSettings, model_window
from bot.llm.learned import FILE, ModelBook, ModelFacts
from bot.llm.loader import litellm, litellm_loaded
from bot.llm.server import served_models, server_root
from bot.llm.wire import model_name
from bot.llm.window import ask_server, resolve
from bot.ops.check import Check
from bot.ops import own_calls
from bot.usage import meter as usage
from bot.usage.meter import Meter
from bot.usage.prices import configured_prices, table_cost
from memory.tokens import count_text

PROBE_TOOL = {"type": "function", "function": {
    "name": "current_time", "description": "The current date and time.",
    "parameters": {"type": "object", "properties": {}}}}
ROUTES = ("openai/", "anthropic/", "gemini/", "openrouter/", "deepseek/", "groq/", "ollama_chat/", "hosted_vllm/")
TRUNCATION_RATIO = 0.6  # a server that reports under 60% of the tokens sent is cutting the prompt


def is_local(api_base: str | None) -> bool:
    host = urlparse(api_base or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback or ip_address(host).is_private
    except ValueError:
        return False


async def probe(settings: Settings) -> list[Check]:
    """The doctor's checks of the configured model."""
    s = dataclasses.replace(settings.llm_settings(), max_tokens=64, retries=0, fallbacks=())
    loading = time.monotonic()
    await litellm_loaded()  # seconds on a first call: timed apart from the model's answer
    loaded = time.monotonic() - loading
    if (unrouted := unrouted_model(s.model, s.api_base)) is not None:
        return [unrouted]
    async with LLM(s) as llm:
        with _metered(settings, llm):
            return await _checks(settings, s, llm, loaded)


async def _checks(settings: Settings, s: LLMSettings, llm: LLM, loaded: float) -> list[Check]:
    """The probe's requests and what the answers say; `loaded`: the seconds litellm's import took."""
    out: list[Check] = []
    started = time.monotonic()
    try:
        reply = await llm.complete([{"role": "user", "content": "What time is it? Call the tool."}], [PROBE_TOOL])
    except ToolsUnsupported as exc:
        out.append(Check("tools", "warn", f"the server refused tools: {exc}",
                         "Tusk answers without tools and keeps memory in a plain-text form"))
        started = time.monotonic()
        try:
            reply = await llm.complete([{"role": "user", "content": "Say OK."}])
        except LLMError as again:
            return [_failed(s, again)]
    except LLMError as exc:  # an error that merely quotes the request (its "tools") is no refusal of tools
        return [_failed(s, exc)]
    elapsed = time.monotonic() - started
    loading = f" (loading litellm took {loaded:.1f}s)" if loaded >= 0.05 else ""
    out.insert(0, Check("LLM", "ok", f"{reply.model} answered in {elapsed:.1f}s{loading}"))
    if not out[1:]:
        out.append(Check("tools", "ok", "the model called the offered tool") if reply.tool_calls else
                   Check("tools", "warn", "the model answered in text instead of calling the offered tool",
                         "fine for chat; a model or server template with tool support does more"))
    if reply.reasoning or reply.thinking_blocks:
        out.append(Check("reasoning", "ok", "a reasoning field came back: Tusk keeps it with tool steps"))
    out.append(await _window(settings, s))
    out.append(_price(settings, s.model))
    if is_local(s.api_base):
        out += await _local(s, llm)
    return out
@contextlib.contextmanager
def _metered(settings: Settings, llm: LLM) -> Iterator[None]:
    """The probe's requests recorded as purpose "probe", in the configured store's ledger (if there is one)."""
    with own_calls.ledger(settings) as ledger:
        if ledger is None:
            yield
            return
        llm.meter = Meter(ledger, None, _prices(settings))
        with usage.scope(purpose="probe"):
            yield


def _prices(settings: Settings) -> dict:
    try:
        return configured_prices(settings.model_choices())
    except ConfigError:  # reported by the configuration check
        return {}


def _price(settings: Settings, model: str) -> Check:
    configured = _prices(settings)
    if table_cost(model, 1_000_000, 0, 0) is not None:
        return Check("price", "ok", f"{model}: litellm's price table knows it")
    if model in configured:
        return Check("price", "ok", f"{model}: priced by TUSK_MODELS")
    # what that means for the dollar limits (the environment's and budgets.json's): the "spend limits" check
    return Check("price", "ok", f"{model} has no known price: its cost is recorded as unknown (never $0)")


def _learned(settings: Settings, model: str) -> ModelFacts:
    """What a running Tusk learned of the model (models.json: a file of the home, or the database's document);
    nothing when the database does not answer (its own check says so)."""
    if settings.store_url() is None:
        return ModelBook(settings.home).get(model)
    from store import prepared
    from store.errors import StoreError

    try:
        with prepared(settings.home, settings.store_url()) as store:
            return ModelBook(store.doc(FILE)).get(model)
    except StoreError:
        return ModelFacts()


async def _window(settings: Settings, s: LLMSettings) -> Check:
    facts = await asyncio.to_thread(_learned, settings, s.model)
    window = resolve(settings.context_window, facts.window, model_window(s.model))
    if window.source == "default":
        window = await ask_server(s.model, s.api_base, s.api_key) or window
    verdict = "warn" if window.source == "default" else "ok"
    return Check("window", verdict, window.describe(),
                 "set TUSK_CONTEXT_WINDOW to the model's context length" if verdict == "warn" else "")


async def _local(s: LLMSettings, llm: LLM) -> list[Check]:
    """A local server's models, and whether it cuts a prompt of known size."""
    out = []
    assert s.api_base is not None
    root = server_root(s.api_base)
    names = await served_models(s.api_base)  # the same list the unknown-model message shows
    if not names:
        out.append(Check("local models", "warn", f"{root} lists no models (/v1/models, /api/tags)"))
    else:
        known = model_name(s.model) in names
        out.append(Check("local models", "ok" if known else "fail", f"{root} serves: {', '.join(names)}",
                         "" if known else f"set TUSK_MODEL to one of them (with its route, e.g. openai/{names[0]})",
                         "" if known else "TUSK_MODEL"))
    text = " ".join(f"word{i}" for i in range(1500))
    sent = count_text(text)
    try:
        reply = await llm.complete([{"role": "user", "content": f"{text}\nReply with OK."}])
    except LLMError as exc:
        return out + [Check("truncation", "warn", f"a {sent:,}-token prompt was refused: {exc}")]
    if reply.prompt_tokens and reply.prompt_tokens < sent * TRUNCATION_RATIO:
        out.append(Check("truncation", "fail", f"sent ~{sent:,} tokens, the server counted {reply.prompt_tokens:,}: "
                         "it cuts long prompts (identity and memory first)",
                         "Ollama: use TUSK_MODEL=ollama_chat/<model> (Tusk sets num_ctx), or raise the "
                         "server's context length (OLLAMA_CONTEXT_LENGTH)"))
    else:
        out.append(Check("truncation", "ok", f"a ~{sent:,}-token prompt arrived whole "
                         f"({reply.prompt_tokens:,} by the server's count)"))
    return out


def unrouted_model(model: str, api_base: str | None) -> Check | None:
    """A failed check when litellm cannot tell which provider `model` goes to (a name without its route,
    such as `llama3` for `openai/llama3`): said in Tusk's words, with the routes to choose from."""
    try:
        litellm().get_llm_provider(model=model, api_base=api_base)
    except Exception:  # litellm raises BadRequestError ("LLM Provider NOT provided") or ValueError: no route
        return _no_route(model, api_base)
    return None


def _no_route(model: str, api_base: str | None) -> Check:
    ollama = urlparse(api_base or "").port == 11434
    if api_base:
        fix = (f"set TUSK_MODEL to ollama_chat/{model} (Ollama's own API) or openai/{model}" if ollama else
               f"set TUSK_MODEL to openai/{model} (an OpenAI-compatible server: llama.cpp, LM Studio, vLLM, "
               f"a proxy), or ollama_chat/{model} for Ollama")
    else:
        fix = f"set TUSK_MODEL to the provider's route and the model, e.g. openai/{model}"
    return Check("LLM", "fail", f"{model} names no provider: litellm needs one before the model's name, as in "
                 f"{', '.join(ROUTES)} (every route: https://docs.litellm.ai/docs/providers)", fix, "TUSK_MODEL")


def _failed(s: LLMSettings, exc: LLMError) -> Check:
    """The model did not answer: what was wrong, the fix that fits the error, and the setting it blames."""
    local = is_local(s.api_base)
    if isinstance(exc, (LLMUnreachable, NotAModelServer)):
        where = s.api_base or "the provider's address"
        fix, setting = (f"is the server running at {where}? Check TUSK_API_BASE" if local else
                        f"check TUSK_API_BASE ({where}) and this machine's connection"), "TUSK_API_BASE"
    elif isinstance(exc, LLMAuthFailed):
        fix, setting = "check TUSK_API_KEY (or the provider's usual key variable)", "TUSK_API_KEY"
    elif isinstance(exc, ModelNotFound):
        fix, setting = ("set TUSK_MODEL to a model the server serves" if local else
                        "check TUSK_MODEL against the provider's model names"), "TUSK_MODEL"
    else:
        fix, setting = "check TUSK_MODEL, TUSK_API_KEY (or the provider's variable) and TUSK_API_BASE", ""
    return Check("LLM", "fail", f"{s.model} did not answer: {exc}", fix, setting)
