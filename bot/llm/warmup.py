"""What a running Tusk loads once it is up: the tokenizer, the model's window, then litellm.

    TuskApp.__aenter__   channels up, /healthz answers, platform messages are journaled
      -> ModelWarmup.start()
    background           the tokenizer built (memory/tokens.py; start-up only checked its file) and litellm
                         imported (bot/llm/loader.py `load_litellm`; seconds, ~190 MB), each in a thread;
                         meanwhile the window litellm's model list gives (read from its file, bot/llm/catalog.py:
                         no import) unless configured or learned, and its largest reply; for a model the list
                         does not know (or an Ollama one), the window its server reports (bot/llm/window.py
                         `ask_server`) -> `settled()`: turns go from here
                         then how many requests the server answers at once (llama.cpp's /props, bot/llm/slots.py)
                         once litellm is loaded: the heap loaded so far frozen out of garbage collection
                         (`freeze_heap`) -> `ready()`
    each turn            awaits `settled()` first: a fresh Tusk's first replies wait for the tokenizer and the
                         window (a fraction of a second), not for litellm; their requests go out on the OpenAI
                         wire directly meanwhile (bot/llm/direct.py), or wait for litellm in bot/llm/client.py
                         for a route that has no direct path

Until then the budget is the provisional one the model's profile starts with (configured, learned, or the
default: bot/llm/profile.py); every reader of the profile sees the settled one from then on.
A failed import is logged here; the turns then fail on it in bot/llm/client.py like any LLM failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
from typing import Any

from bot.llm import catalog
from bot.llm.client import LLMSettings
from bot.llm.loader import litellm_loaded, load_litellm, model_max_output, model_window
from bot.llm.profile import ModelProfile
from bot.llm.server import served_slots
from bot.llm.slots import Slots
from bot.llm.window import ask_server, resolve
from bot.threads import in_thread
from memory import tokens

logger = logging.getLogger(__name__)


def freeze_heap() -> None:
    """Leave the objects loaded so far out of every later garbage collection (gc.freeze). litellm and
    Tusk's modules are ~400,000 objects that live as long as the process; walked by each full collection,
    they stalled every chat's turn for ~0.1-0.2 s now and then. Collected once first, so no garbage is kept."""
    gc.collect()
    gc.freeze()


class ModelWarmup:
    def __init__(self, settings: LLMSettings, configured: int | None, profile: ModelProfile, slots: Slots) -> None:
        """Settles `profile`'s window (`configured`: TUSK_CONTEXT_WINDOW) and learns `slots`' count."""
        self.settings = settings
        self.configured = configured
        self.profile, self.slots = profile, slots
        self._task: asyncio.Task[None] | None = None
        self._tokenizer: concurrent.futures.Future[Any] | None = None
        self._settled: asyncio.Future[None] | None = None

    def start(self) -> None:
        """Start loading (once); returns at once."""
        if self._task is None:  # the threads start now, not when the loop first runs the task
            self._tokenizer = in_thread(tokens.encoding, "tokenizer")
            load_litellm()
            self._settled = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._run(), name="model warm-up")

    async def settled(self) -> None:
        """Return once the tokenizer is built and the window settled: what a turn needs (litellm may still load)."""
        self.start()
        assert self._settled is not None
        await asyncio.shield(self._settled)

    async def ready(self) -> None:
        """Return once litellm is loaded too (and the heap frozen): the whole warm-up."""
        self.start()
        assert self._task is not None
        await asyncio.shield(self._task)  # a cancelled waiter does not cancel the warm-up for the others

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        assert self._tokenizer is not None and self._settled is not None
        try:
            await self._settle()
        finally:
            if not self._settled.done():
                self._settled.set_result(None)
        await self._learn_slots()
        try:
            await litellm_loaded()
        except Exception:  # a broken install: each turn reports it; Tusk itself (console, admin) goes on
            logger.exception("litellm could not be imported: no model can be asked "
                             "(reinstall it: pip install --force-reinstall litellm)")
            return
        catalog.models.cache_clear()  # litellm holds the same list now: its parsed copy (~15 MB) goes
        freeze_heap()
        logger.info("litellm loaded: the providers and features that need it no longer wait")

    async def _settle(self) -> None:
        assert self._tokenizer is not None
        try:
            await asyncio.wrap_future(self._tokenizer)
        except tokens.TokenizerUnavailable:  # its file was there at start: a turn that counts raises it again
            logger.exception("the tokenizer could not be built")
        s = self.settings
        known, known_output = await asyncio.to_thread(lambda: (model_window(s.model), model_max_output(s.model)))
        learned = self.profile.book.get(s.model).window if self.profile.book is not None else None
        window = resolve(self.configured, learned, known)
        self.profile.settle(window, known_output)
        ollama = s.model.startswith(("ollama/", "ollama_chat/"))
        if window.source == "default" or (window.source == "litellm" and ollama):
            if (asked := await ask_server(s.model, s.api_base, s.api_key)) is not None:  # the server knows best
                self.profile.settle(asked)

    async def _learn_slots(self) -> None:
        """How many requests the server answers at once, where it says (after `settled`: only housekeeping
        needs it, and the first turns need not wait for one more question to the server)."""
        s = self.settings
        if s.slots is None and s.api_base and (count := await served_slots(s.api_base, s.api_key)) is not None:
            self.slots.count = count
            logger.info("the model's server answers %d request(s) at once%s", count,
                        ": replies go before housekeeping" if count == 1 else "")
