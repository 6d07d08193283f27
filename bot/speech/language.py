"""The language a reply is written in, so it is spoken in that language (py3langid, a small local model).

    detect(text) -> "de" | None     ISO 639-1; None when the text is too short or the model is unsure
    ChatLanguages.of(key, found)    the language to speak in: `found` (detect's answer), else the chat's last
                                    one: a short "Ja." in a German chat stays German

The model (about 3 MB, numpy) loads on first use, in a thread: `load()` warms it at start.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from bot.events import ChatKey

MIN_CHARS = 12  # shorter texts are too little to tell a language by
MIN_CONFIDENCE = 0.6
_lock = threading.Lock()
_identifier: Any = None


def load() -> Any:
    """The language model, loaded once (a second or two; call it from a thread)."""
    global _identifier
    with _lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def detect(text: str) -> str | None:
    """The ISO 639-1 code of `text`'s language, or None if it is too short to tell or the model is unsure."""
    if len(text.strip()) < MIN_CHARS:
        return None
    language, confidence = load().classify(text)
    return str(language) if confidence >= MIN_CONFIDENCE else None


class ChatLanguages:
    """The language each chat was last spoken to in (bounded: the least recent chats are forgotten)."""

    def __init__(self, default: str = "en", size: int = 4096) -> None:
        self.default, self.size = default, size
        self._seen: OrderedDict[ChatKey, str] = OrderedDict()

    def of(self, key: ChatKey, found: str | None) -> str:
        """`found` (a reply's language, `detect`), kept as the chat's; when None, the chat's last one, else the
        default. Called on the event loop only (detect runs in a thread; this touches the shared map)."""
        if found is None:
            return self._seen.get(key, self.default)
        self._seen[key] = found
        self._seen.move_to_end(key)
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return found
