"""What a request holds, in tokens, before it is sent: the estimate the spend limits reserve.

A provider bills the whole prompt it builds from a request: every message (the system prompt included),
each image, and the tool schemas, which its chat template writes into the prompt with a preamble of its
own. `RequestEstimate.tokens(model, messages, tools)` counts all of that on the safe side:

    a message     the larger of two counts: cl100k_base's (memory/tokens.py, an image part as the
                  `IMAGE_TOKENS` a provider bills at most, never its base64 size) and a quarter of its
                  characters as JSON (how a text of rare words, code or another script comes out of a
                  smaller vocabulary), plus the message's framing
    the tools     the same two counts of their JSON schemas, plus `TOOLS_PREAMBLE` (the instructions a
                  chat template puts around them) and `TOOL_FRAMING` each
    the model     (`scaled`) after each call the provider's own `prompt_tokens` against the estimate: a model whose
                  provider counts more (another tokenizer, a longer template) has its later estimates
                  scaled by the largest such ratio of its last `RATIOS_KEPT` calls (at most `MAX_RATIO`)

Counts of a message are cached by its text (the system prompt and the history repeat from call to
call), so a long prompt is tokenised once, not at every tool step (bench/usage.py: a 74,000-token request
is counted in ~15 ms the first time, ~0.5 ms again with one more message).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict, deque
from typing import Any

from memory.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, count_message, count_text

REQUEST_OVERHEAD = 3  # the reply's priming (OpenAI counts 3 tokens for every reply)
TOOLS_PREAMBLE = 350  # what a provider writes around the schemas: Anthropic documents 346 tokens (its tool-use
# system prompt), chat templates (Qwen, Llama 3.1) ~100-150; OpenAI counts less than the JSON itself
TOOL_FRAMING = 8  # per tool: its own delimiters in the template
CACHED_MESSAGES = 4096
RATIOS_KEPT = 50
MIN_LEARNING = 256  # estimates below this say little about a provider's ratio (its fixed framing dominates)
MAX_RATIO = 2.0


def _without_images(value: Any) -> Any:
    """The message with each image part's data left out (it is counted as `IMAGE_TOKENS`)."""
    if isinstance(value, dict):
        if value.get("type") == "image_url":
            return {"type": "image_url"}
        return {k: _without_images(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_images(v) for v in value]
    return value


def _images(message: dict[str, Any]) -> int:
    content = message.get("content")
    return sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url") \
        if isinstance(content, list) else 0


def message_tokens(message: dict[str, Any]) -> int:
    """One message on the safe side: the larger of its cl100k_base count and a quarter of its JSON."""
    bare = json.dumps(_without_images(message), ensure_ascii=False, default=str)
    by_chars = len(bare) // 4 + MESSAGE_OVERHEAD + _images(message) * IMAGE_TOKENS
    return max(by_chars, count_message(message))


def tools_tokens(tools: list[dict[str, Any]] | None) -> int:
    """The tool schemas as a chat template writes them into the prompt."""
    if not tools:
        return 0
    text = json.dumps(tools, ensure_ascii=False, default=str)
    return max(len(text) // 4, count_text(text)) + TOOLS_PREAMBLE + TOOL_FRAMING * len(tools)


class RequestEstimate:
    """The estimator of one process: its cache of message counts and what each model's provider taught it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted: OrderedDict[tuple, int] = OrderedDict()
        self._ratios: dict[str, deque[float]] = {}

    def _message(self, message: dict[str, Any]) -> int:
        # the message's own strings as the key: a string caches its hash, so a long history is looked up, not hashed
        key = tuple(sorted((k, v if isinstance(v, str) or v is None else json.dumps(v, sort_keys=True, default=str))
                           for k, v in message.items()))
        with self._lock:
            if (hit := self._counted.get(key)) is not None:
                self._counted.move_to_end(key)
                return hit
        tokens = message_tokens(message)
        with self._lock:
            self._counted[key] = tokens
            while len(self._counted) > CACHED_MESSAGES:
                self._counted.popitem(last=False)
        return tokens

    def counted(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        """The request's prompt as Tusk counts it (before what the model's provider taught it)."""
        return REQUEST_OVERHEAD + sum(self._message(m) for m in messages) + tools_tokens(tools)

    def ratio(self, model: str) -> float:
        """How much more than Tusk's count this model's provider was seen to bill (1.0: not more)."""
        with self._lock:
            seen = self._ratios.get(model)
            return max(seen, default=1.0) if seen else 1.0

    def scaled(self, model: str, counted: int) -> int:
        """The prompt tokens to reserve for a request to `model` that Tusk counted as `counted`."""
        return math.ceil(counted * self.ratio(model))

    def learn(self, model: str, counted: int, billed: int) -> None:
        """The provider's `prompt_tokens` for a request Tusk counted as `counted`."""
        if counted < MIN_LEARNING or billed <= 0:
            return
        with self._lock:
            seen = self._ratios.setdefault(model, deque(maxlen=RATIOS_KEPT))
            seen.append(min(MAX_RATIO, max(1.0, billed / counted)))
