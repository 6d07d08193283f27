"""What Tusk learned about each model from its server, kept in `$TUSK_HOME/models.json`
(or the database's shared document of that name when the store is PostgreSQL: store/).

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

Readable JSON, owner-only, written atomically; an unreadable file is treated as empty. Only the model's
profile (bot/llm/profile.py) writes it, as it learns; it reads it back at start.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.files.shared import FileDoc
from store.shared import SharedDoc

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
