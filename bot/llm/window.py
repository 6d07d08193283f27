"""The model's real window: what Tusk budgets for, and where that figure came from.

    TUSK_CONTEXT_WINDOW          "configured"
    $TUSK_HOME/models.json       "learned": the server said a prompt was too long (bot/llm/translate.py reads
                                 the N of "maximum context length is N"; without one, a step down)
    litellm's model list         "litellm"
    the server, asked at start   "server": vLLM's /v1/models `max_model_len`, Ollama's /api/show
                                 `<arch>.context_length`, LM Studio's /api/v0/models, llama.cpp's /props
    65,536                       "default"

A learned window is kept per model (bot/llm/learned.py) so a restart does not overflow again. A
configured window wins at start; an overflow still teaches the running process a smaller one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.llm.server import ModelServer
from bot.llm.wire import model_name


logger = logging.getLogger(__name__)

DEFAULT_WINDOW = 65_536
STEP_DOWN = 0.75  # an overflow that names no size: budget for three quarters of what was tried
OLLAMA_CAP = 16_384  # Ollama allocates num_ctx up front: a model's trained 128k would not fit a small box
OLLAMA_BASE = "http://localhost:11434"  # litellm's default for the ollama routes
OLLAMA_OPENAI_WINDOW = 4096  # Ollama's default context, all its OpenAI-compatible endpoint runs a model at


@dataclass(frozen=True, slots=True)
class Window:
    tokens: int
    source: str  # configured | learned | litellm | server (...) | default

    def describe(self) -> str:
        return f"{self.tokens:,} tokens ({self.source})"


def resolve(configured: int | None, learned: int | None, known: int | None) -> Window:
    """The window to budget for before asking the server: configured, learned, litellm's, default."""
    if configured:
        return Window(configured, "configured")
    if learned:
        return Window(learned, "learned")
    if known:
        return Window(known, "litellm")
    return Window(DEFAULT_WINDOW, "default")


UNKNOWN_REPLY = 1024  # the reply reserve while the window is a guess: a looping model stops early
DEFAULT_REPLY = 4096  # ... for a model whose largest reply litellm does not know


def reply_cap(configured: int | None, known_output: int | None, source: str) -> int:
    """The most a reply may take: TUSK_MAX_REPLY_TOKENS, else the model's own limit, else a default
    (the budget's reserve is this or a quarter of the window, whichever is smaller)."""
    return configured or known_output or (UNKNOWN_REPLY if source == "default" else DEFAULT_REPLY)


def step_down(current: int, said: int | None) -> int:
    """The window after an overflow: what the server said, if smaller; a tenth less when it names the window
    already budgeted for (its tokenizer counts more than Tusk's estimate); else three quarters."""
    if said and said < current:
        return said
    return max(1024, int(current * (0.9 if said == current else STEP_DOWN)))


async def ask_server(model: str, api_base: str | None, api_key: str | None, timeout: float = 3.0) -> Window | None:
    """The model's window as an OpenAI-compatible local server reports it, if it does."""
    if not api_base and model.startswith(("ollama/", "ollama_chat/")):
        api_base = OLLAMA_BASE
    if not api_base:
        return None
    name = model_name(model)
    native_ollama = model.startswith(("ollama/", "ollama_chat/"))
    probes = (("/v1/models", None, _from_openai_models),
              (f"/api/v0/models/{name}", None, _from_lmstudio),
              ("/api/show", {"model": name}, _from_ollama_show if native_ollama else _ollama_default),
              ("/props", None, _from_llamacpp_props))
    async with ModelServer(api_base, api_key, timeout) as server:
        for path, body, read in probes:
            if (data := await server.ask(path, body)) is None:
                continue
            tokens = read(data, name)
            if isinstance(tokens, int) and tokens > 0:
                return Window(tokens, f"server ({path})")
    return None


def _from_openai_models(data: Any, name: str) -> int | None:
    """vLLM's `max_model_len` (others' `context_length`) of the entry for this model, or of the only one."""
    entries = [e for e in (data.get("data") if isinstance(data, dict) else None) or [] if isinstance(e, dict)]
    entry = next((e for e in entries if e.get("id") == name), entries[0] if len(entries) == 1 else None)
    for key in ("max_model_len", "context_length", "max_context_length"):
        if entry is not None and isinstance(entry.get(key), int):
            return entry[key]
    return None


def _from_lmstudio(data: Any, name: str) -> int | None:
    if not isinstance(data, dict):
        return None
    for key in ("loaded_context_length", "max_context_length"):
        if isinstance(data.get(key), int):
            return data[key]
    return None


def _from_ollama_show(data: Any, name: str) -> int | None:
    """`num_ctx` in the Modelfile parameters when set, else `model_info["<arch>.context_length"]` up to
    OLLAMA_CAP (Tusk sends it back as num_ctx, and Ollama reserves memory for all of it)."""
    if not isinstance(data, dict):
        return None
    for line in str(data.get("parameters") or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = data.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(".context_length") and isinstance(value, int):
                return min(value, OLLAMA_CAP)
    return None


def _ollama_default(data: Any, name: str) -> int | None:
    """Ollama behind its OpenAI-compatible endpoint: that runs the model at Ollama's default context
    whatever the model could take (num_ctx is ignored there), so that is the window."""
    return OLLAMA_OPENAI_WINDOW if isinstance(data, dict) and "model_info" in data else None


def _from_llamacpp_props(data: Any, name: str) -> int | None:
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) else None
