"""What Tusk learned about each model from its server, kept in `$TUSK_HOME/models.json`.

    {"openai/tiny": {"window": 2048, "no_tools": true, "truncates": false, "no_stream": "tools",
                     "reason": "...", "updated": "2026-12-03 08:40:00"}}

- `window`: tokens the server really takes (it said a prompt was too long; bot/llm/window.py);
- `no_tools`: the server refused tools ("does not support tools") or ignored them: turns go
  without tools and consolidation uses its plain-text form;
- `truncates`: the server reported far fewer prompt tokens than Tusk sent (Ollama cutting the
  front of the prompt at its own context size);
- `no_stream`: `"tools"` or `"all"`: the server streamed nothing (or an empty reply) for such a
  request but answered it whole (Ollama's /v1 drops streamed tool calls, a server that cannot
  stream at all): those requests go unstreamed (bot/llm/client.py).

Readable JSON, owner-only, written atomically; an unreadable file is treated as empty.

`Learner` applies what a server says to the running Tusk: the budget (memory/consolidate.py),
whether tools are offered (bot/context.py), the num_ctx sent to Ollama (bot/llm/client.py).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import ContextOverflow, ToolsUnsupported
from bot.llm.loader import model_max_output, model_window
from bot.llm.window import Window, reply_cap, step_down
from store.files.shared import FileDoc
from store.shared import SharedDoc
from memory.consolidate import Budget

if TYPE_CHECKING:
    from bot.consolidation import Consolidator

logger = logging.getLogger(__name__)

FILE = "models.json"


@dataclass(frozen=True, slots=True)
class ModelFacts:
    window: int | None = None
    no_tools: bool = False
    truncates: bool = False
    no_stream: str | None = None  # "tools" | "all"


class ModelBook:
    def __init__(self, doc: SharedDoc | Path) -> None:
        self.doc = FileDoc(doc, FILE) if isinstance(doc, Path) else doc  # a home: its models.json
        self._cache: tuple[str, dict[str, Any]] | None = None

    def _parse(self, raw: str | None) -> dict[str, Any]:
        try:
            data = json.loads(raw) if raw is not None else {}
        except ValueError:
            logger.warning("%s is unreadable; what was learned about models starts again", self.doc.where)
            return {}
        return data if isinstance(data, dict) else {}

    def _read(self) -> dict[str, Any]:
        try:
            raw = self.doc.read()
        except OSError:
            logger.warning("%s is unreadable; what was learned about models starts again", self.doc.where)
            return {}
        if raw is None:
            return {}
        if self._cache is None or self._cache[0] != raw:
            self._cache = (raw, self._parse(raw))
        return self._cache[1]

    def get(self, model: str) -> ModelFacts:
        entry = self._read().get(model)
        if not isinstance(entry, dict):
            return ModelFacts()
        window = entry.get("window")
        return ModelFacts(window=window if type(window) is int and window > 0 else None,  # noqa: E721
                          no_tools=entry.get("no_tools") is True, truncates=entry.get("truncates") is True,
                          no_stream=entry.get("no_stream") if entry.get("no_stream") in ("tools", "all") else None)

    def unstreamed(self) -> dict[str, str]:
        """model -> "tools" | "all", for every model whose server was found unable to stream."""
        return {m: f for m in self._read() if (f := self.get(m).no_stream) is not None}

    def note(self, model: str, reason: str, **facts: Any) -> None:
        """Record `facts` (window=, no_tools=, truncates=, no_stream=) for `model`, with why."""
        with self.doc.updating() as box:
            data = dict(self._parse(box.text))
            entry = dict(data.get(model) or {})
            entry.update(facts, reason=reason[:300], updated=time.strftime("%Y-%m-%d %H:%M:%S"))
            data[model] = entry
            box.text = json.dumps(data, indent=1)
        self._cache = None


TRUNCATION_RATIO = 0.5  # the server counted under half the prompt Tusk sent: it cut the front off
TRUNCATION_MIN = 1000  # ... of a prompt at least this long (short prompts vary too much between tokenizers)
TRUNCATION_FIX = ("the model server cuts long prompts (identity and memory first). Ollama: use TUSK_MODEL="
                  "ollama_chat/<model> so Tusk sets num_ctx, or raise OLLAMA_CONTEXT_LENGTH; others: set "
                  "TUSK_CONTEXT_WINDOW to the context length the server runs")


class Learner:
    """What the model's server said, applied to the running Tusk and kept in models.json."""

    def __init__(self, book: ModelBook, model: str, consolidator: Consolidator, context: Any, llm: Any,
                 max_reply_tokens: int | None, memory_max_tokens: int | None, known_output: int | None) -> None:
        self.book, self.model = book, model
        self.consolidator, self.context, self.llm = consolidator, context, llm
        self.max_reply_tokens, self.memory_max_tokens = max_reply_tokens, memory_max_tokens
        self.known_output = known_output  # the model's largest reply per litellm, if it knows
        facts = book.get(model)
        self.truncates = facts.truncates
        context.tools_available = not facts.no_tools
        llm.window = consolidator.budget.window
        llm.no_stream.update(book.unstreamed())
        llm.on_no_stream = self.stream_refused

    def set_window(self, window: Window) -> None:
        """Budget for `window` from now on (the memory cap follows it unless TUSK_MEMORY_MAX_TOKENS is set)."""
        c = self.consolidator
        c.budget = Budget.for_window(window.tokens, reply_cap(self.max_reply_tokens, self.known_output, window.source),
                                     window.source)
        if not self.memory_max_tokens:
            c.max_memory_tokens = window.tokens // 10
        self.llm.window = window.tokens
        logger.info("model window: %s", window.describe())

    def budget_for(self, model: str) -> Budget:
        """The budget of a turn on `model`: the main model's (the consolidator's), or for a chat that picked
        another with /model, that model's own window: learned, else litellm's, else the main one's."""
        if model == self.model:
            return self.consolidator.budget
        learned = self.book.get(model).window
        window = learned or model_window(model) or self.consolidator.budget.window
        source = "learned" if learned else "litellm" if window != self.consolidator.budget.window else "as the default model"
        return Budget.for_window(window, reply_cap(self.max_reply_tokens, model_max_output(model), source), source)

    def takes_tools(self, model: str) -> bool:
        """Whether turns on `model` are offered tools (not once its server refused them)."""
        return self.context.tools_available if model == self.model else not self.book.get(model).no_tools

    def learn_window(self, exc: ContextOverflow, model: str | None = None) -> bool:
        """The server said a prompt was too long: keep a smaller window. False when there is none to learn."""
        if model is not None and model != self.model:
            current = self.budget_for(model).window
            tokens = step_down(current, exc.window)
            if tokens >= current:
                return False
            logger.warning("the prompt was over %s's window; budgeting for %d tokens from now on", model, tokens)
            self.book.note(model, str(exc), window=tokens)
            return True
        current = self.consolidator.budget.window
        tokens = step_down(current, exc.window)
        if tokens >= current:
            return False
        said = f"the server named {exc.window:,}" if exc.window else "the server named no size"
        logger.warning("the prompt was over %s's window; budgeting for %d tokens from now on (was %d; %s)",
                       self.model, tokens, current, said)
        self.book.note(self.model, str(exc), window=tokens)
        self.set_window(Window(tokens, "learned from the server's error"))
        return True

    def tools_refused(self, exc: ToolsUnsupported, model: str | None = None) -> None:
        """The server takes no tools for this model: turns go without them from now on."""
        if model is not None and model != self.model:
            logger.warning("%s does not take tools (%s); its chats answer without them from now on", model, exc)
            self.book.note(model, str(exc), no_tools=True)
            return
        logger.warning("%s does not take tools (%s); answering without them from now on, memory in plain text",
                       self.model, exc)
        self.book.note(self.model, str(exc), no_tools=True)
        self.context.tools_available = False

    def stream_refused(self, model: str, scope: str, why: str) -> None:
        """`model`'s server answered whole what it streamed as nothing: kept, so a restart does not ask twice."""
        self.book.note(model, f"streamed {why}, answered whole", no_stream=scope)

    def prompt_counted(self, sent: int, counted: int) -> None:
        """Compare Tusk's estimate of a prompt with the server's count; a far smaller count is a cut prompt."""
        if self.truncates or not counted or sent < TRUNCATION_MIN or counted >= sent * TRUNCATION_RATIO:
            return
        self.truncates = True
        logger.warning("%s: sent ~%d prompt tokens, the server counted %d: %s", self.model, sent, counted,
                       TRUNCATION_FIX)
        self.book.note(self.model, f"sent ~{sent} tokens, the server counted {counted}", truncates=True)

    def notes(self) -> tuple[str, ...]:
        """What /status says about the model beyond its window."""
        out = []
        if not self.context.tools_available:
            out.append("Tools: unavailable (the model or its server takes none); memory is kept in plain text")
        if self.truncates:
            out.append(f"Warning: {TRUNCATION_FIX}")
        if (scope := self.llm.no_stream.get(self.model)) is not None:
            out.append("Streaming: off" + (" for replies that may use tools" if scope == "tools" else "")
                       + " (the model's server answers those whole)")
        return tuple(out)
