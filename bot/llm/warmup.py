"""What a running Tusk loads once it is up: litellm, and what litellm and the model's server say of the model.

    TuskApp.__aenter__   channels up, /healthz answers, platform messages are journaled
      -> ModelWarmup.start()
    background           the tokenizer built (memory/tokens.py; start-up only checked its file) and
                         litellm imported (bot/llm/loader.py `load_litellm`; seconds, ~190 MB), each in a thread;
                         then the heap loaded so far frozen out of garbage collection (`freeze_heap`)
                         the window litellm knows for the model (unless configured or learned) and its
                         largest reply; then, for a model litellm does not know (or an Ollama one), the
                         window its server reports (bot/llm/window.py `ask_server`)
    each turn            awaits `ready()` first: the first turns after a start wait here, with the
                         platforms showing "typing..." as for any turn

Until then the budget is the provisional one TuskApp starts with (configured, learned, or the default).
A failed import is logged here; the turns then fail on it in bot/llm/client.py like any LLM failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
from typing import Any

from bot.llm.client import LLMSettings
from bot.llm.learned import Learner
from bot.llm.loader import litellm_loaded, load_litellm, model_max_output, model_window
from bot.llm.window import Window, ask_server, resolve
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
    def __init__(self, settings: LLMSettings, configured: int | None, learner: Learner) -> None:
        self.settings = settings
        self.configured = configured  # TUSK_CONTEXT_WINDOW
        self.learner = learner
        self._task: asyncio.Task[None] | None = None
        self._tokenizer: concurrent.futures.Future[Any] | None = None

    @staticmethod
    def provisional(configured: int | None, learned: int | None) -> Window:
        """The window to budget for until litellm is loaded: configured, learned, else the default."""
        return resolve(configured, learned, None)

    def start(self) -> None:
        """Start loading (once); returns at once."""
        if self._task is None:  # the threads start now, not when the loop first runs the task
            self._tokenizer = in_thread(tokens.encoding, "tokenizer")
            load_litellm()
            self._task = asyncio.create_task(self._run(), name="model warm-up")

    async def ready(self) -> None:
        """Return once litellm is loaded and the window settled (at once from then on)."""
        self.start()
        assert self._task is not None
        await asyncio.shield(self._task)  # a cancelled waiter does not cancel the warm-up for the others

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        assert self._tokenizer is not None
        try:
            await asyncio.wrap_future(self._tokenizer)
        except tokens.TokenizerUnavailable:  # its file was there at start: a turn that counts raises it again
            logger.exception("the tokenizer could not be built")
        try:
            await litellm_loaded()
        except Exception:  # a broken install: each turn reports it; Tusk itself (console, admin) goes on
            logger.exception("litellm could not be imported: no model can be asked "
                             "(reinstall it: pip install --force-reinstall litellm)")
            return
        freeze_heap()
        s = self.settings
        self.learner.known_output = model_max_output(s.model)
        window = resolve(self.configured, self.learner.book.get(s.model).window, model_window(s.model))
        self.learner.set_window(window)
        if window.source == "default" or (window.source == "litellm" and s.model.startswith(("ollama/", "ollama_chat/"))):
            if (asked := await ask_server(s.model, s.api_base, s.api_key)) is not None:  # the server knows best
                self.learner.set_window(asked)
