"""Token estimates with tiktoken's cl100k_base, offline.

tiktoken downloads its encodings on first use; with no internet that fails. The litellm
wheel ships cl100k_base in `litellm/litellm_core_utils/tokenizers/` under the name
tiktoken looks for (the sha1 of the download URL), so `TIKTOKEN_CACHE_DIR` is pointed
there before the first load, found without importing litellm. If the encoding still
cannot load, `encoding()` raises: a silent fallback would make every budget wrong.

Counts are estimates for any provider's tokenizer, good enough for budgeting. Each
message is counted once, when it is saved, and the count is stored with it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

MESSAGE_OVERHEAD = 4  # role and separators, per OpenAI's accounting for chat messages
# An image part is counted as a fixed estimate: Tusk sends images of at most 1568 px a side (bot/media/images.py);
# Anthropic bills such an image about 1,600 tokens (it scales to ~1.15 megapixels, w*h/750), OpenAI at most 1,445
# (high detail, 768 px tiles), Gemini 258 a tile. The largest of these keeps the budget on the safe side.
IMAGE_TOKENS = 1600


class TokenizerUnavailable(RuntimeError):
    pass


def _bundled_cache_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


@functools.cache
def encoding() -> Any:
    if "TIKTOKEN_CACHE_DIR" not in os.environ and (folder := _bundled_cache_dir()) is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception as exc:  # network error, missing file, broken install: all mean "cannot count"
        raise TokenizerUnavailable(
            f"cannot load the cl100k_base tokenizer offline ({exc}); reinstall litellm, or set "
            "TIKTOKEN_CACHE_DIR to a folder holding the cl100k_base file"
        ) from exc


def count_text(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def count_message(message: dict[str, Any]) -> int:
    """Estimated prompt tokens of one chat-format message (content, tool calls, ids)."""
    total = MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        total += count_text(content)
    elif isinstance(content, list):  # content parts: text counted, each image a fixed estimate
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                total += count_text(part["text"])
            elif isinstance(part, dict) and part.get("type") == "image_url":
                total += IMAGE_TOKENS
    if message.get("tool_calls"):
        total += count_text(json.dumps(message["tool_calls"], ensure_ascii=False))
    for key in ("tool_call_id", "name"):
        if isinstance(message.get(key), str):
            total += count_text(message[key])
    return total
