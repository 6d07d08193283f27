"""The model's stream read back into one reply, while whoever watches it is fed the text.

    litellm stream (stream=True) --chunks--> Assembly --text so far--> Watcher.feed (bot/stream.py's Live)
    end of stream                             Assembly.response(): a chat completion, for bot/llm/reply.py

Real providers' chunks are put back together here: text, reasoning, Anthropic's thinking blocks
(one partial block per piece, joined), tool calls in pieces under an `index` (or none).

A stream that ends or breaks before anything was shown is `StreamEmpty`: bot/llm/client.py asks
once more without streaming. One cut after some of it was shown is `StreamCut` (raised by the
client): not retried, the agent ends the turn with what came (bot/stream.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Protocol

from bot.errors import LLMError, LLMUnavailable


class Watcher(Protocol):
    """Who watches a reply while its stream is read (bot/stream.py's `Live`): fed the raw text so far."""

    shown: bool  # some of this call's text went to the user: a cut now is a StreamCut, not a retry

    def begin(self) -> None: ...

    def feed(self, raw: str) -> None: ...


class StreamCut(LLMError):
    """The stream broke after part of the reply was shown; not retried."""

    user_message = "The connection to the model failed mid-reply."


class StreamEmpty(LLMError):
    """The stream ended or broke before anything was shown: no answer yet. bot/llm/client.py asks the same request
    once more without streaming, which gives the server's real answer or error. `broken`: it broke (a
    dropped connection, a server error inside it), which says nothing about what the server can stream."""

    def __init__(self, message: str, broken: bool = False, unfinished: bool = False) -> None:
        super().__init__(message)
        self.broken = broken
        self.unfinished = unfinished  # chunks came, then it ended without a finish reason (a server that stopped)


@dataclass(slots=True)
class _Call:
    id: str | None = None
    name: str = ""
    arguments: str = ""
    fields: dict[str, Any] | None = None  # provider_specific_fields (Gemini's thought signature)


@dataclass(slots=True)
class Assembly:
    """A streamed reply put back together, in the shape `bot.llm.reply.parse` reads (a chat completion's)."""

    model: str
    content: str = ""
    reasoning: str = ""
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    chunks: int = 0
    choices_seen: bool = False

    def add(self, chunk: Any) -> str | None:
        """Take one chunk; returns its text, if it carried some."""
        self.chunks += 1
        self.model = getattr(chunk, "model", None) or self.model
        self.usage = getattr(chunk, "usage", None) or self.usage
        text = None
        for choice in (getattr(chunk, "choices", None) or ())[:1]:
            self.choices_seen = True
            self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            if isinstance(piece := getattr(delta, "content", None), str):
                self.content += piece
                text = piece
            if isinstance(thought := getattr(delta, "reasoning_content", None), str):
                self.reasoning += thought
            for block in getattr(delta, "thinking_blocks", None) or ():
                if isinstance(block, dict):
                    self._thinking_piece(block)
            for raw in getattr(delta, "tool_calls", None) or ():
                self._call_piece(raw)
        return text

    def _thinking_piece(self, piece: dict[str, Any]) -> None:
        """Anthropic streams a thinking block as thinking_delta pieces then a signature_delta, which litellm
        hands on as one partial block each, under the block's `index`: they are joined into the one block
        (text and signature) that must go back unchanged. litellm would drop each unsigned piece and send
        the signature with empty thinking: Anthropic's 400 "Invalid `signature` in `thinking` block"."""
        index = piece.get("index")
        block = {k: v for k, v in piece.items() if k != "index" and v is not None}
        last = self.thinking_blocks[-1] if self.thinking_blocks else None
        if last is not None and index is not None and last.get("_index") == index and block.get("type") == "thinking":
            last["thinking"] = last.get("thinking", "") + (block.get("thinking") or "")
            last["signature"] = block.get("signature") or last.get("signature")
            return
        self.thinking_blocks.append({**block, "_index": index})

    def _call_piece(self, raw: Any) -> None:
        """Real providers send a call's id and name in its first delta, its arguments in pieces after, all
        under one `index`; some send no index (then a new id starts a new call) or the arguments whole."""
        index, call_id = getattr(raw, "index", None), getattr(raw, "id", None)
        if index is None:
            index = len(self.calls) if call_id or not self.calls else max(self.calls)
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or call_id
        if isinstance(fields := getattr(raw, "provider_specific_fields", None), dict) and fields:
            call.fields = {**(call.fields or {}), **fields}
        function = getattr(raw, "function", None)
        name, args = getattr(function, "name", None), getattr(function, "arguments", None)
        if isinstance(name, str) and name and not call.name.endswith(name):
            call.name += name
        if isinstance(args, dict | list):
            call.arguments += json.dumps(args, ensure_ascii=False)
        elif isinstance(args, str):
            call.arguments += args

    def response(self) -> Any:
        calls = [SimpleNamespace(id=c.id, function=SimpleNamespace(name=c.name or None, arguments=c.arguments),
                                 provider_specific_fields=c.fields) for _, c in sorted(self.calls.items())]
        blocks = [{k: v for k, v in b.items() if k != "_index" and v is not None} for b in self.thinking_blocks]
        message = SimpleNamespace(content=self.content, tool_calls=calls or None,
                                  reasoning_content=self.reasoning or None, thinking_blocks=blocks)
        choice = SimpleNamespace(message=message, finish_reason=self.finish_reason)
        return SimpleNamespace(choices=[choice], usage=self.usage, model=self.model)


async def collect(stream: Any, live: Watcher, model: str) -> Any:
    """Read a litellm stream to its end, feeding `live` the text as it comes; the whole reply (`Assembly`).
    A stream that ends or breaks before anything was shown, with no reply in it, is `StreamEmpty`."""
    whole = Assembly(model)
    raw = ""
    try:
        async for chunk in stream:
            if piece := whole.add(chunk):
                raw += piece
                live.feed(raw)
    except Exception as exc:  # litellm wraps a broken stream in its own types: the server was reached
        if not live.shown and 400 <= (getattr(exc, "status_code", None) or 0) < 500:
            raise  # a refusal (an error object in the stream, Gemini's route): read as the same error unstreamed
        if not live.shown:
            raise StreamEmpty(f"a stream that broke: {type(exc).__name__}: {str(exc)[:200]}", broken=True) from exc
        raise LLMUnavailable(f"the stream from {model} broke: {type(exc).__name__}: {str(exc)[:300]}") from exc
    if not whole.choices_seen:
        raise StreamEmpty("no chunk" if not whole.chunks else "no choices")
    if whole.finish_reason is None:
        if not live.shown:
            raise StreamEmpty("a stream that ended before the reply did", unfinished=True)
        raise LLMUnavailable(f"the stream from {model} ended before the reply did")
    return whole.response()
