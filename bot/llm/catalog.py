"""litellm's bundled model list, read without importing litellm: windows, largest replies, prices.

litellm ships its model list as JSON (`model_prices_and_context_window_backup.json`, the list it reads
itself with LITELLM_LOCAL_MODEL_COST_MAP). Importing litellm takes seconds of CPU; reading that file takes
~0.1 s, so a fresh Tusk knows a model's window and price before litellm is loaded (bot/llm/warmup.py,
bot/usage/prices.py), and its first replies need not wait for the import (bot/llm/direct.py).

    entry(model)    the list's entry for a litellm model string, found as litellm finds it for the common
                    forms: the string itself (`gemini/gemini-2.5-flash`), else the name without its route
                    whose entry is of that provider (`openai/gpt-4o-mini` -> `gpt-4o-mini`)
    cost(...)       input, cached input and output tokens at the entry's prices (None without one)

Once litellm is loaded, its own functions answer (bot/llm/loader.py); a test checks the two agree.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FILE = "model_prices_and_context_window_backup.json"
ROUTE_PROVIDERS = {"ollama_chat": ("ollama", "ollama_chat")}  # else a route's own name (or `<route>-...`)


@functools.cache
def models() -> dict[str, Any]:
    """The whole list ({} when litellm is not installed or its file cannot be read)."""
    spec = importlib.util.find_spec("litellm")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / FILE
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        logger.warning("litellm's model list %s could not be read: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def entry(model: str) -> dict[str, Any]:
    """The list's entry for `model`, or {} for a model it does not know."""
    table = models()
    found = table.get(model)
    if isinstance(found, dict) and model != "sample_spec":
        return found
    route, _, name = model.partition("/")
    if not name:
        return {}
    found = table.get(name)
    if not isinstance(found, dict):
        return {}
    provider = found.get("litellm_provider")
    if isinstance(provider, str) and (provider in ROUTE_PROVIDERS.get(route, (route,))
                                      or provider.startswith(f"{route}-")):  # vertex_ai-language-models
        return found
    return {}


def window(model: str) -> int | None:
    info = entry(model)
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


def max_output(model: str) -> int | None:
    value = entry(model).get("max_output_tokens")
    return value if isinstance(value, int) and value > 0 else None


def cost(model: str, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float | None:
    """The call's price from the list (cached input at its own price where the entry has one), or None."""
    info = entry(model)
    per_in, per_out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not isinstance(per_in, int | float) or not isinstance(per_out, int | float):
        return None
    per_cached = info.get("cache_read_input_token_cost")
    cached = min(cached_tokens, input_tokens) if isinstance(per_cached, int | float) else 0
    return (input_tokens - cached) * per_in + cached * (per_cached or 0.0) + output_tokens * per_out
