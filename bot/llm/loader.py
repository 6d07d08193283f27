"""litellm itself: imported on first use or in the background, and what its bundled model list says.

litellm is imported on first use: the import costs seconds, and without
`LITELLM_LOCAL_MODEL_COST_MAP` it would block on a network fetch of a price list. A running
Tusk starts it in a background thread (`load_litellm`) and requests wait for it there
(`litellm_loaded`), so nothing blocks the event loop meanwhile.

`model_window(model)` and `model_max_output(model)` read litellm's bundled model list (no network):
through litellm once it is loaded, before that from the file itself (bot/llm/catalog.py), so asking
never waits for the import. `loaded()` is litellm if its import is done, else None (never waits).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import threading
from types import ModuleType
from typing import Any

from bot.llm import catalog
from bot.threads import in_thread


@functools.cache
def litellm() -> ModuleType:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as lib

    lib.suppress_debug_info = True
    lib.telemetry = False
    lib.drop_params = True  # a provider that lacks a parameter (e.g. tool_choice) gets it dropped, not an error
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return lib


_loading: concurrent.futures.Future[ModuleType] | None = None
_loading_lock = threading.Lock()


def load_litellm() -> concurrent.futures.Future[ModuleType]:
    """Start importing litellm in a daemon thread (once); the future holds the module or the import's error."""
    global _loading
    with _loading_lock:
        if _loading is None:
            _loading = in_thread(litellm, "litellm-import")
        return _loading


def loaded() -> ModuleType | None:
    """litellm if its import has finished (and worked), else None: never waits, never imports."""
    future = _loading
    if future is None or not future.done() or future.exception() is not None:
        return None
    return future.result()


async def litellm_loaded() -> ModuleType:
    """litellm, imported in the background thread if it is not yet: the event loop goes on meanwhile."""
    return await asyncio.wrap_future(load_litellm())


def _model_info(model: str) -> dict[str, Any]:
    """What litellm's bundled model list says of `model` ({} for a model it does not know)."""
    if loaded() is None:  # the import would take seconds: the same list, read from its file
        return catalog.entry(model)
    try:
        return dict(litellm().get_model_info(model))
    except Exception:  # litellm raises plain Exception for unknown models
        return {}


def model_window(model: str) -> int | None:
    """The model's input window from litellm's bundled model list, if it knows the model."""
    info = _model_info(model)
    return info.get("max_input_tokens") or info.get("max_tokens") or None


def model_max_output(model: str) -> int | None:
    """The most tokens the model may write in one reply, from litellm's bundled model list."""
    return _model_info(model).get("max_output_tokens") or None
