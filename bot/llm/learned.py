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

from memory.files import write_atomic

logger = logging.getLogger(__name__)

FILE = "models.json"


@dataclass(frozen=True, slots=True)
class ModelFacts:
    window: int | None = None
    no_tools: bool = False
    truncates: bool = False
    no_stream: str | None = None  # "tools" | "all"


class ModelBook:
    def __init__(self, home: Path) -> None:
        self.path = Path(home) / FILE
        self._cache: tuple[float, dict[str, Any]] | None = None

    def _read(self) -> dict[str, Any]:
        try:
            mtime = self.path.stat().st_mtime
            if self._cache and self._cache[0] == mtime:
                return self._cache[1]
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            logger.warning("%s is unreadable; what was learned about models starts again", self.path)
            return {}
        data = data if isinstance(data, dict) else {}
        self._cache = (mtime, data)
        return data

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
        data = dict(self._read())
        entry = dict(data.get(model) or {})
        entry.update(facts, reason=reason[:300], updated=time.strftime("%Y-%m-%d %H:%M:%S"))
        data[model] = entry
        write_atomic(self.path, json.dumps(data, indent=1), follow_dir=True)  # $TUSK_HOME itself may be a link
        self._cache = None
