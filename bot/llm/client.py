"""`LLM`: one chat request through litellm, retried, with Tusk's own types and errors out.

`LLM.complete` sends one chat request, retrying transient failures (429, 5xx, timeouts,
connection errors, unreadable replies) with exponential backoff that honours
`Retry-After`, then each fallback model in turn. litellm's exceptions never leave it:
bot/llm/translate.py makes them `LLMUnavailable`, `LLMRejected`, `ContextOverflow` (with the
window the server named, if it did) or `LLMFiltered` (bot/errors.py). `TUSK_LLM_TIMEOUT`
bounds the whole request, body included.

Replies are read into Tusk's types by bot/llm/reply.py. For
OpenAI-compatible servers (the `openai/` route with a base URL) litellm is handed a client
whose transport reads a message `content` given as a list of parts as its text: litellm's
own reply model takes only a string there and would refuse the whole reply.

litellm itself is imported on first use or in the background (bot/llm/loader.py). `openai/` requests (the
OpenAI API and every OpenAI-compatible server) go out on the OpenAI wire directly (bot/llm/direct.py): a
fresh Tusk's first replies do not wait for litellm's import, and each call costs a fraction of litellm's
(TUSK_LLM_CLIENT=litellm sends them through litellm once it is loaded, directly only until then).
Everything above (retries, fallbacks, streaming, the meter, the errors) is the same on both paths
(tests/test_direct.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bot import logs, metrics
from bot.errors import (ContextOverflow, LLMError, LLMUnavailable, LLMUnreachable, ModelNotFound, NotAModelServer,
                        ToolsUnsupported)
from bot.llm.direct import DirectClient, body_for, counted_usage
from bot.llm.direct import route as direct_route
from bot.llm.loader import litellm_loaded, loaded
from bot.llm.profile import ModelProfile
from bot.llm.reply import LLMReply, parse
from bot.llm.server import served_models
from bot.llm.slots import Preempted, QuietWatcher, Slots, Turns, is_housekeeping
from bot.llm.streams import StreamCut, StreamEmpty, Watcher, collect
from bot.llm.translate import translate
from bot.llm.wire import (GEMINI_ROUTES, for_model, model_name, provider_base, public_url, thinking_options,
                          wants_readable_client)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LLMSettings:
    model: str
    api_base: str | None = None
    api_key: str | None = None  # None: the provider's usual variable (OPENAI_API_KEY, ...)
    fallbacks: tuple[str, ...] = ()
    timeout: float = 120.0
    retries: int = 3  # extra attempts per model after the first
    backoff: float = 1.0  # first retry delay in seconds, doubled each time
    max_backoff: float = 60.0
    max_tokens: int | None = None
    thinking_budget: int | None = None  # Anthropic extended thinking: tokens it may think (bot/llm/wire.py)
    slots: int | None = None  # TUSK_MODEL_SLOTS: requests the server answers at once (None: learned or unknown)
    direct: bool = True  # TUSK_LLM_CLIENT=direct: the OpenAI wire without litellm (bot/llm/direct.py)


class LLM:
    """`aclose()` (or `async with`) releases its client when done.

    `profile`: what is known of the model (bot/llm/profile.py), read for each request and taught by the
    servers' answers here alone; `meter` (bot/usage/meter.py): each request checked against the limits and
    recorded; `turns`: the chat turns under way, which housekeeping waits for on a one-slot server."""

    def __init__(self, settings: LLMSettings, profile: ModelProfile | None = None, meter: Any = None,
                 turns: Turns | None = None) -> None:
        self.settings = settings
        self.profile = profile if profile is not None else ModelProfile(settings.model)
        self._budgeted = profile is not None  # a bare LLM (the doctor's probe) budgets for no window: no num_ctx
        self.meter = meter
        self._client: Any = None
        self.direct = settings.direct  # the OpenAI wire without litellm (bot/llm/direct.py; TUSK_LLM_CLIENT)
        self._direct: DirectClient | None = None
        self.slots = Slots(settings.slots, turns)  # who goes first on a one-slot server (bot/llm/slots.py)

    @property
    def no_stream(self) -> Mapping[str, str]:
        """model -> "tools" | "all": the requests its server cannot stream (the profile's)."""
        return self.profile.no_stream

    async def __aenter__(self) -> LLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        direct, self._direct = self._direct, None
        if direct is not None:
            await direct.aclose()

    async def _explained(self, error: LLMError, model: str) -> LLMError:
        """`error` with the words a chat user can act on, where the cause is plain."""
        where = self.settings.api_base or ("http://localhost:11434" if model.startswith("ollama") else None)
        no_connection = isinstance(error, LLMUnreachable) or "connect" in str(error).lower()
        if isinstance(error, LLMUnavailable) and where and no_connection:
            server = "Ollama" if model.startswith("ollama") or ":11434" in where else "the model server"
            error.user_message = f"I can't reach the model: is {server} running at {public_url(where)}?"
            if isinstance(error, LLMUnreachable):
                error.where, error.server = public_url(where), server
        elif isinstance(error, NotAModelServer) and where:
            error.where = public_url(where)
        elif isinstance(error, ModelNotFound):
            served = await served_models(where) if where else []
            error.model, error.served = model_name(model), tuple(served)
            error.user_message = (f"The model server does not know the model {model_name(model)!r}."
                                  + (f" It serves: {', '.join(served[:10])}." if served else "")
                                  + " The operator can set TUSK_MODEL (tusk doctor lists the models).")
        return error

    def _client_for(self, model: str) -> Any:
        s = self.settings
        if not wants_readable_client(model, s.api_base):
            return None
        if self._client is None:
            from bot.llm.readable import readable_client  # httpx and openai: loaded with litellm, not at start

            assert s.api_base is not None
            self._client = readable_client(s.api_base, s.api_key)
        return self._client

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        tool_choice: str | dict[str, Any] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        live: Watcher | None = None,
        temperature: float | None = None,
        estimate: int | None = None,
    ) -> LLMReply:
        """One reply for `messages`; raises LLMUnavailable / LLMRejected when none can be had.
        `max_tokens` bounds the reply (else TUSK_MAX_REPLY_TOKENS, if set). With `live`, the reply is
        streamed into it (bot/llm/streams.py); a stream cut after `live` showed some of it is `StreamCut`.
        On a one-slot server a person's request goes first and housekeeping yields (bot/llm/slots.py:
        `Preempted`). What the server's answer teaches goes into the profile (`_learned`); `estimate`: the
        caller's count of the prompt, compared with the server's (a far smaller one: a server cutting it)."""
        if self.slots.one and is_housekeeping() and live is None:
            live = QuietWatcher()  # streamed: a closed connection stops the server's generation
        return await self.slots.run(lambda: self._complete(messages, tools, tool_choice, model, max_tokens, live,
                                                           temperature, estimate))

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        tool_choice: str | dict[str, Any] | None, model: str | None, max_tokens: int | None,
                        live: Watcher | None, temperature: float | None, estimate: int | None) -> LLMReply:
        models = (model or self.settings.model, *self.settings.fallbacks)
        options = {"tools": tools or None, "tool_choice": tool_choice if tools else None,
                   "max_tokens": max_tokens or self.settings.max_tokens, "temperature": temperature}
        error: LLMError | None = None
        for name in models:
            try:
                with self._learned(name, bool(tools)):
                    reply = await self._with_retries(name, messages, options, live)
            except LLMUnavailable as exc:
                error = exc
                logger.warning("model %s unavailable: %s", name, exc)
                continue
            if estimate:
                self.profile.prompt_counted(name, estimate, reply.prompt_tokens)
            return reply
        assert error is not None
        raise error

    @contextlib.contextmanager
    def _learned(self, model: str, with_tools: bool) -> Iterator[None]:
        """A window or tools refusal from `model`'s server, taught to the profile on its way to the caller:
        `exc.learned` says whether the profile changed (so the same request, rebuilt, may now go)."""
        try:
            yield
        except ContextOverflow as exc:
            exc.learned = self.profile.overflowed(exc, model)
            raise
        except ToolsUnsupported as exc:
            exc.learned = with_tools and self.profile.tools_refused(exc, model)
            raise

    async def _with_retries(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
                            live: Watcher | None = None) -> LLMReply:
        s = self.settings
        for attempt in range(s.retries + 1):
            try:
                return await self._reply(model, messages, options, live)
            except LLMUnavailable as exc:
                if attempt == s.retries:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else s.backoff * 2**attempt  # 0: now
                delay = min(s.max_backoff, wait)
                logger.info("LLM attempt %d failed (%s); retrying in %.1fs", attempt + 1, exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _reply(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
                     live: Watcher | None) -> LLMReply:
        """One reply, streamed into `live` where the server can stream this request. A stream that brought
        nothing (no chunk, no finish, an empty reply) is asked again once without streaming: the server's
        real answer or error (a window error included) comes that way; if it is an answer to a stream that
        brought no chunk or an empty reply, the server is remembered as one that cannot stream such requests
        (one that broke or ended early was cut, and says nothing of the server). Gemini's
        MALFORMED_FUNCTION_CALL (no text, no call) is asked once more too."""
        if live is None or not self.streams(model, options):
            reply = await self._once(model, messages, options)
        else:
            learn = not model.startswith(GEMINI_ROUTES)  # Gemini's empties are its model's (read whole below)
            try:
                reply = await self._once(model, messages, options, live)
                why = "an empty reply" if _empty(reply) else None
            except StreamEmpty as exc:
                if isinstance(live, QuietWatcher) and (exc.broken or exc.unfinished):
                    # housekeeping on a one-slot server that the server itself cut short (llama-cpp-python
                    # ends a stream when another request waits): later, streamed again, not now and whole
                    raise Preempted(f"the server ended the stream early ({exc})") from exc
                # a stream that broke, or that chunks began and [DONE] ended early, was cut (llama-cpp-python
                # ends one so when another request waits): asked again whole now, not taken for a refusal
                why, learn = str(exc), learn and not exc.broken and not exc.unfinished
            if why is not None:
                logger.warning("the stream from %s brought nothing (%s); asking once more without streaming",
                               model, why)
                reply = await self._once(model, messages, options)
                if learn and not _empty(reply) and reply.finish_reason != "malformed_call":
                    self.profile.stream_refused(model, bool(options.get("tools")), why)
                return reply
        if reply.finish_reason == "malformed_call":
            logger.warning("%s wrote a malformed tool call; asking once more", model)
            reply = await self._once(model, messages, options)
        return reply

    def streams(self, model: str, options: dict[str, Any]) -> bool:
        """Whether a request of `model` (with these options) may stream: not where its server was found not to."""
        return self.profile.streams(model, bool(options.get("tools")))

    async def _once(self, model: str, messages: list[dict[str, Any]], options: dict[str, Any],
                    live: Watcher | None = None) -> LLMReply:
        s = self.settings
        lib = loaded()
        # while litellm loads, the OpenAI wire goes out directly (bot/llm/direct.py); the rest waits for it
        # the OpenAI wire goes out directly (bot/llm/direct.py): while litellm loads (the first replies do not
        # wait for its import), and after it too unless TUSK_LLM_CLIENT=litellm; other routes wait for litellm
        base = direct_route(model, s.api_base) if self.direct or lib is None else None
        if base is None:
            lib = await litellm_loaded()
        kwargs: dict[str, Any] = {"timeout": s.timeout, "num_retries": 0, "max_retries": 0}
        # Ollama runs a model at its own small context and cuts the front of a longer prompt without a word;
        # its native route takes num_ctx (the OpenAI-compatible one ignores it): the window Tusk budgets for.
        ollama = self._budgeted and model.startswith(("ollama/", "ollama_chat/"))
        num_ctx = self.profile.budget_for(model).window if ollama else None
        client = self._client_for(model) if base is None else None
        for key, value in (("api_base", provider_base(model, s.api_base)), ("api_key", s.api_key), *options.items(),
                           ("client", client), ("num_ctx", num_ctx)):
            if value is not None:
                kwargs[key] = value
        kwargs |= thinking_options(model, s.thinking_budget, kwargs)
        if live is not None:
            kwargs |= {"stream": True, "stream_options": {"include_usage": True}}
            live.begin()
        admitted = (self.meter.admit(model, messages, kwargs.get("max_tokens"), kwargs.get("tools"))
                    if self.meter is not None else None)
        try:
            reply = await self._sent(lib, base, model, messages, kwargs, live)
        except BaseException as exc:
            if admitted is not None:
                self.meter.release(admitted)
            if isinstance(exc, Exception):
                metrics.llm_error(model, exc)
            raise
        if admitted is not None:
            self.meter.record(admitted, model, reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens,
                              reply.provider_cost, own_output=len(reply.content or "") // 4)
        return reply

    async def _request(self, lib: Any, base: str | None, model: str, messages: list[dict[str, Any]],
                       kwargs: dict[str, Any]) -> Any:
        """The request on the wire: through litellm, or (`base`) directly on the OpenAI wire."""
        messages = for_model(model, messages)
        if base is None:
            return await lib.acompletion(model=model, messages=messages, **kwargs)
        if self._direct is None:
            self._direct = DirectClient(self.settings.api_key)
        return await self._direct.send(base, body_for(model, messages, kwargs), self.settings.timeout)

    async def _sent(self, lib: Any, base: str | None, model: str, messages: list[dict[str, Any]],
                    kwargs: dict[str, Any], live: Watcher | None) -> LLMReply:
        """The request on the wire and its reply read; every failure in Tusk's own errors."""
        timeout = self.settings.timeout
        started = time.monotonic()
        try:  # litellm's timeout bounds each read; a server that trickles bytes is bounded here, stream and all
            async with asyncio.timeout(timeout):
                response = await self._request(lib, base, model, messages, kwargs)
                if live is not None:
                    response = await collect(response, live, model)
                    if base is not None and response.usage is None:  # what litellm counts itself
                        response.usage = counted_usage(messages, response.choices[0].message)
        except TimeoutError as exc:
            error: LLMError = LLMUnavailable(f"{model} did not answer within {timeout:g}s (TUSK_LLM_TIMEOUT)")
            raise (StreamCut(str(error)) if live is not None and live.shown else error) from exc
        except LLMError as exc:  # what bot/llm/streams.py found in the stream itself
            raise (StreamCut(str(exc)) if live is not None and live.shown else exc) from exc
        except Exception as exc:  # litellm raises many types; all are translated here
            if live is not None and live.shown:
                raise StreamCut(f"{type(exc).__name__}: {str(exc)[:300]}") from exc
            raise await self._explained(translate(exc), model) from exc
        try:
            reply = parse(response, model)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise LLMUnavailable(f"unreadable reply from {model}: {exc!r}") from exc
        if (stats := logs.current_stats()) is not None:
            stats.add_call(reply.prompt_tokens, reply.completion_tokens, (time.monotonic() - started) * 1000)
        return reply


def _empty(reply: LLMReply) -> bool:
    """No text and no call, and not because the reply was cut or filtered. A streamed one is asked again
    whole: servers that cannot stream a request (llama.cpp over its window, Ollama's /v1 with tools)
    end the stream so; litellm keeps Gemini's MALFORMED_FUNCTION_CALL reason only in a whole reply."""
    return not reply.content and not reply.tool_calls and reply.finish_reason in ("stop", "tool_calls", "")
