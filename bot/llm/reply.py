"""A provider's reply read into Tusk's types: `LLMReply`, with its `ToolCall`s.

Replies are read as real providers send them (`parse`, memory/wire.py): tool
calls get Tusk's own ids, repaired names and arguments; `<think>` blocks leave the text;
reasoning (`reasoning_content`, Anthropic's `thinking_blocks`) is kept apart for the caller
to store with a tool-call step; `finish_reason` says whether the text was cut.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.errors import LLMFiltered
from bot.llm.wire import strip_think
from memory.wire import new_call_id, repair_arguments, repair_name, thought_signature, wire_call

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str  # Tusk's own (memory/wire.py), whatever the provider sent
    name: str
    arguments: str  # the text of a JSON object, repaired; "{}" when the model's could not be read
    error: str | None = None  # why the model's arguments could not be read (its raw text included)
    signature: str | None = None  # Gemini's thought signature on this call, sent back unchanged (memory/wire.py)

    def to_wire(self) -> dict[str, Any]:
        return wire_call(self.id, self.name, self.arguments, self.signature)


@dataclass(frozen=True, slots=True)
class LLMReply:
    content: str | None  # the text for the user: no <think> block, no reasoning
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # "length": cut by max_tokens; "content_filter": stopped by the provider;
    # "malformed_call": Gemini's MALFORMED_FUNCTION_CALL, twice in a row
    reasoning: str | None = None  # reasoning_content (DeepSeek, Qwen, Kimi, OpenRouter, vLLM)
    thinking_blocks: tuple[dict[str, Any], ...] = ()  # Anthropic's signed thinking blocks
    cached_tokens: int = 0  # prompt tokens the provider served from its cache (part of prompt_tokens)
    provider_cost: float | None = None  # USD, where the provider says what the call cost (OpenRouter)

    @property
    def cut(self) -> bool:
        return self.finish_reason == "length"

    def step(self) -> dict[str, Any]:
        """This reply as the assistant message of a tool step in the next request: its calls with the
        reasoning that led to them (DeepSeek and Anthropic with thinking answer 400 without it)."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content or None,
                               "tool_calls": [c.to_wire() for c in self.tool_calls]}
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        if self.thinking_blocks:
            out["thinking_blocks"] = list(self.thinking_blocks)
        return out


def parse(response: Any, model: str) -> LLMReply:
    if not response.choices:  # what Azure and others send when their filter drops the whole answer
        raise LLMFiltered(f"{model} returned no choices")
    choice = response.choices[0]
    message = choice.message
    finish = str(getattr(choice, "finish_reason", None) or "stop")
    calls = tuple(filter(None, map(_call, message.tool_calls or ())))
    content = strip_think(message.content if isinstance(message.content, str) else None)
    native = (getattr(choice, "provider_specific_fields", None) or {}).get("native_finish_reason")
    if native == "MALFORMED_FUNCTION_CALL" and not calls and not content:  # Gemini: litellm says "stop"
        finish = "malformed_call"
    if finish == "content_filter" and not content and not calls:
        raise LLMFiltered(f"{model} stopped with finish_reason content_filter")
    usage = getattr(response, "usage", None)
    reasoning = getattr(message, "reasoning_content", None)
    blocks = getattr(message, "thinking_blocks", None) or ()
    return LLMReply(
        content=content,
        tool_calls=calls,
        model=getattr(response, "model", None) or model,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=finish,
        reasoning=reasoning if isinstance(reasoning, str) and reasoning.strip() else None,
        thinking_blocks=tuple(dict(b) for b in blocks if isinstance(b, dict)),
        cached_tokens=_cached(usage),
        provider_cost=_cost(usage),
    )


def _cached(usage: Any) -> int:
    """Cached prompt tokens as the provider reported them: OpenAI's prompt_tokens_details.cached_tokens,
    Anthropic's cache_read_input_tokens (both kept by litellm)."""
    details = getattr(usage, "prompt_tokens_details", None)
    for value in (getattr(details, "cached_tokens", None), getattr(usage, "cache_read_input_tokens", None)):
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _cost(usage: Any) -> float | None:
    """The provider's own figure for the call (OpenRouter's `usage.cost`, in USD), if it sent one."""
    value = getattr(usage, "cost", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _call(raw: Any) -> ToolCall | None:
    """Tusk's form of one tool call, or None (logged) when it names nothing usable."""
    function = getattr(raw, "function", None)
    name = repair_name(getattr(function, "name", None))
    if name is None:
        logger.warning("dropped a tool call without a usable name: %r", getattr(function, "name", None))
        return None
    arguments, error = repair_arguments(getattr(function, "arguments", None))
    signature = thought_signature(getattr(raw, "id", None), getattr(raw, "provider_specific_fields", None),
                                  getattr(function, "provider_specific_fields", None))
    return ToolCall(id=new_call_id(), name=name, arguments=arguments, error=error, signature=signature)
