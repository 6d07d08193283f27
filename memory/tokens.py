"""Token estimates with tiktoken's cl100k_base, offline.

tiktoken downloads its encodings on first use; with no internet that fails. The litellm
wheel ships cl100k_base in `litellm/litellm_core_utils/tokenizers/` under the name
tiktoken looks for (the sha1 of the download URL), so `TIKTOKEN_CACHE_DIR` is pointed
there before the first load, found without importing litellm. If the encoding still
cannot load, `encoding()` raises: a silent fallback would make every budget wrong.

Building the encoding takes about half a second, so a starting Tusk only `check()`s that the
file tiktoken will read is there and intact (milliseconds) and builds it in the background;
`encoding()` is safe to call from several threads (the second caller waits for the first).

Counts are estimates for any provider's tokenizer, good enough for budgeting. Each
message is counted once, when it is saved, and the count is stored with it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

MESSAGE_OVERHEAD = 4  # role and separators, per OpenAI's accounting for chat messages
# An image part is counted as a fixed estimate: Tusk sends images of at most 1568 px a side (bot/media/images.py);
# Anthropic bills such an image about 1,600 tokens (it scales to ~1.15 megapixels, w*h/750), OpenAI at most 1,445
# (high detail, 768 px tiles), Gemini 258 a tile. The largest of these keeps the budget on the safe side.
IMAGE_TOKENS = 1600

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"  # as tiktoken_ext names it
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

_encoding: Any = None
_loading = threading.Lock()


class TokenizerUnavailable(RuntimeError):
    pass


def _bundled_cache_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def _point_at_bundle() -> None:
    if "TIKTOKEN_CACHE_DIR" not in os.environ and (folder := _bundled_cache_dir()) is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


def bundle_intact() -> bool:
    """Whether the cl100k_base file is where tiktoken will look, and intact (hashed: a few ms, nothing built)."""
    _point_at_bundle()
    folder = os.environ["TIKTOKEN_CACHE_DIR"] if "TIKTOKEN_CACHE_DIR" in os.environ else \
        os.environ.get("DATA_GYM_CACHE_DIR")  # the order tiktoken looks in ("": no cache)
    if not folder:
        return False
    path = Path(folder) / hashlib.sha1(CL100K_URL.encode()).hexdigest()  # tiktoken's name for the file
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == CL100K_SHA256
    except OSError:
        return False


def check() -> None:
    """Raise TokenizerUnavailable unless cl100k_base loads offline: cheap when its file is intact, else
    the encoding is loaded to find out."""
    if not bundle_intact():
        encoding()


def encoding() -> Any:
    global _encoding
    if _encoding is None:
        with _loading:  # built once, whichever thread asks first
            if _encoding is None:
                _encoding = _load()
    return _encoding


def _load() -> Any:
    _point_at_bundle()
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
