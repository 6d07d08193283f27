"""`ModelProfile`: what Tusk knows of its model now, in one place, owned by the LLM boundary.

    window       the tokens the prompt may use and where that figure came from (bot/llm/window.py)
    budget       that window less the reply's reserve (memory/consolidate.py); the memory cap beside it (a tenth
                 of the window unless TUSK_MEMORY_MAX_TOKENS is set); `budget_for(model)`: a /model pick's own
    tools        whether the server takes tools (`takes_tools(model)`)
    streaming    which requests go unstreamed (`streams(model, with_tools)`)
    truncation   whether the server cuts the front of long prompts (`truncates`)
    price        the owner's price per model (TUSK_MODELS), beside litellm's own (bot/usage/prices.py)

Read by everything (the consolidator's budget, the context builder, the tasks, the skills, /status) at use
time, so a window learned mid-run applies everywhere at once. Written only by the LLM boundary:

    settle(window, known_output)    bot/llm/warmup.py: litellm's figures, the window the server reports
    overflowed(exc, model)          bot/llm/client.py: the server said a prompt was too long
    tools_refused(exc, model)       ... the server takes no tools
    stream_refused(model, ...)      ... the server streamed nothing but answers whole
    prompt_counted(model, ...)      ... the server counted far fewer prompt tokens than were sent

What is learned is kept in $TUSK_HOME/models.json (bot/llm/learned.py's `ModelBook`), so a restart does
not overflow or ask again. A model other than the main one (a chat's /model pick, the consolidation model)
has its facts kept there and read back from there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

from bot.errors import ContextOverflow, ToolsUnsupported
from bot.llm.learned import ModelBook, ModelFacts
from bot.llm.loader import model_max_output, model_window
from bot.llm.window import Window, reply_cap, resolve, step_down
from bot.usage.prices import ModelPrice
from memory.consolidate import Budget

logger = logging.getLogger(__name__)

TRUNCATION_RATIO = 0.5  # the server counted under half the prompt Tusk sent: it cut the front off
TRUNCATION_MIN = 1000  # ... of a prompt at least this long (short prompts vary too much between tokenizers)
TRUNCATION_FIX = ("the model server cuts long prompts (identity and memory first). Ollama: use TUSK_MODEL="
                  "ollama_chat/<model> so Tusk sets num_ctx, or raise OLLAMA_CONTEXT_LENGTH; others: set "
                  "TUSK_CONTEXT_WINDOW to the context length the server runs")


class ModelProfile:
    """The main model's window, budget, tools, streaming, truncation and price; other models' from the book."""

    def __init__(self, model: str, book: ModelBook | None = None, *, configured_window: int | None = None,
                 max_reply_tokens: int | None = None, memory_max_tokens: int | None = None,
                 prices: Mapping[str, ModelPrice] | None = None) -> None:
        """`book`: where facts are kept (None: nothing kept, e.g. `tusk doctor`'s one request). Until the
        warm-up settles it, the window is the provisional one: configured, learned, else the default."""
        self.model, self.book = model, book
        self.max_reply_tokens, self.memory_max_tokens = max_reply_tokens, memory_max_tokens
        self.prices: Mapping[str, ModelPrice] = MappingProxyType(dict(prices or {}))
        facts = self._facts(model)
        self._tools, self._truncates = not facts.no_tools, facts.truncates
        self._no_stream: dict[str, str] = book.unstreamed() if book is not None else {}
        self._known_output: int | None = None  # the model's largest reply per litellm, once it is read
        self._set_window(resolve(configured_window, facts.window, None))

    # what everyone reads

    @property
    def window(self) -> Window:
        return self._window

    @property
    def budget(self) -> Budget:
        """The main model's budget now (consolidation's, and a turn's on that model)."""
        return self._budget

    @property
    def memory_cap(self) -> int:
        """Tokens MEMORY.md may take: TUSK_MEMORY_MAX_TOKENS, else a tenth of the window."""
        return self.memory_max_tokens or self._window.tokens // 10

    @property
    def known_output(self) -> int | None:
        return self._known_output

    @property
    def tools(self) -> bool:
        """Whether the main model is offered tools (not once its server refused them)."""
        return self._tools

    @property
    def truncates(self) -> bool:
        return self._truncates

    @property
    def no_stream(self) -> Mapping[str, str]:
        """model -> "tools" | "all": the requests its server cannot stream (with tools, or at all)."""
        return MappingProxyType(self._no_stream)

    def budget_for(self, model: str) -> Budget:
        """The budget of a turn on `model`: the main model's, or for another (a chat's /model pick) its own
        window: learned, else litellm's, else the main one's."""
        if model == self.model:
            return self._budget
        learned = self._facts(model).window
        window = learned or model_window(model) or self._budget.window
        source = "learned" if learned else "litellm" if window != self._budget.window else "as the default model"
        return Budget.for_window(window, reply_cap(self.max_reply_tokens, model_max_output(model), source), source)

    def takes_tools(self, model: str) -> bool:
        """Whether requests on `model` are offered tools."""
        return self._tools if model == self.model else not self._facts(model).no_tools

    def streams(self, model: str, with_tools: bool) -> bool:
        """Whether a request on `model` (with tools or not) may stream: not where its server was found not to."""
        scope = self._no_stream.get(model)
        return scope is None or (scope == "tools" and not with_tools)

    def price(self, model: str) -> ModelPrice | None:
        """The owner's price for `model` (TUSK_MODELS), if set."""
        return self.prices.get(model)

    def notes(self) -> tuple[str, ...]:
        """What /status says about the model beyond its window."""
        out = []
        if not self._tools:
            out.append("Tools: unavailable (the model or its server takes none); memory is kept in plain text")
        if self._truncates:
            out.append(f"Warning: {TRUNCATION_FIX}")
        if (scope := self._no_stream.get(self.model)) is not None:
            out.append("Streaming: off" + (" for replies that may use tools" if scope == "tools" else "")
                       + " (the model's server answers those whole)")
        return tuple(out)

    # what the LLM boundary writes, as servers teach it

    def settle(self, window: Window, known_output: int | None = None) -> None:
        """The warm-up's figures: the window from now on, and the model's largest reply where litellm knows it."""
        if known_output is not None:
            self._known_output = known_output
        self._set_window(window)
        logger.info("model window: %s", window.describe())

    def overflowed(self, exc: ContextOverflow, model: str) -> bool:
        """The server said a prompt on `model` was too long: a smaller window, kept. False when there is none
        smaller to learn (the caller then gives up rather than send the same again)."""
        current = self.budget_for(model).window
        tokens = step_down(current, exc.window)
        if tokens >= current:
            return False
        said = f"the server named {exc.window:,}" if exc.window else "the server named no size"
        logger.warning("the prompt was over %s's window; budgeting for %d tokens from now on (was %d; %s)",
                       model, tokens, current, said)
        self._note(model, str(exc), window=tokens)
        if model == self.model:
            self._set_window(Window(tokens, "learned from the server's error"))
            logger.info("model window: %s", self._window.describe())
        return True

    def tools_refused(self, exc: ToolsUnsupported, model: str) -> bool:
        """The server takes no tools for `model`: requests go without them from now on. False when it was
        known already (a request without tools refused: nothing to learn)."""
        if not self.takes_tools(model):
            return False
        logger.warning("%s does not take tools (%s); answering without them from now on%s", model, exc,
                       ", memory in plain text" if model == self.model else "")
        self._note(model, str(exc), no_tools=True)
        if model == self.model:
            self._tools = False
        return True

    def stream_refused(self, model: str, with_tools: bool, why: str) -> None:
        """`model`'s server answered whole what it streamed as nothing: those requests go unstreamed."""
        scope = "tools" if with_tools else "all"
        self._no_stream[model] = scope
        logger.warning("%s's server streamed %s but answers whole: its requests%s go unstreamed from now on",
                       model, why, " with tools" if with_tools else "")
        self._note(model, f"streamed {why}, answered whole", no_stream=scope)

    def prompt_counted(self, model: str, sent: int, counted: int) -> None:
        """Compare Tusk's estimate of a prompt with the server's count; a far smaller count is a cut prompt."""
        if (model != self.model or self._truncates or not counted or sent < TRUNCATION_MIN
                or counted >= sent * TRUNCATION_RATIO):
            return
        self._truncates = True
        logger.warning("%s: sent ~%d prompt tokens, the server counted %d: %s", model, sent, counted, TRUNCATION_FIX)
        self._note(model, f"sent ~{sent} tokens, the server counted {counted}", truncates=True)

    def _set_window(self, window: Window) -> None:
        self._window = window
        cap = reply_cap(self.max_reply_tokens, self._known_output, window.source)
        self._budget = Budget.for_window(window.tokens, cap, window.source)

    def _facts(self, model: str) -> ModelFacts:
        return self.book.get(model) if self.book is not None else ModelFacts()

    def _note(self, model: str, reason: str, **facts: object) -> None:
        if self.book is not None:
            self.book.note(model, reason, **facts)
