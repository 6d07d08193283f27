"""The text Tusk read from documents, kept per chat so `search_history` finds it later.

    documents/<id>.json   one per document (0600, in a 0700 folder), replaced whole:
        {"schema": 1, "name": "report.pdf", "source": "file", "url": null, "what": "PDF, 12 pages",
         "ts": 1764680000.0, "sender_id": "7", "sender_name": "Ann", "chars": 41233, "cut": false,
         "text": "--- page 1 ---\n..."}

Written when a document's text is read for a turn: a file sent in the chat (a PDF or a text file:
bot/media/reader.py) or a page `web_fetch` read (bot/tools/web/fetch.py, `source` "web" with its
`url`). `<id>` comes from the sender and the text, so the same document from the same person is kept
once (its date refreshed). Caps (`DocumentLimits`): one document's text is cut at `max_chars`
(TUSK_DOCUMENT_INDEX_MAX_CHARS, 0: nothing is kept), and a chat keeps at most `chat_max_chars`
(TUSK_DOCUMENT_INDEX_CHAT_MAX_CHARS) of them all: the oldest go first. The chat's search index
(memory/search_index.py) follows this folder, so a rebuilt index has them again; /forget deletes the
folder, /forget me the sender's documents.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memory.files import write_atomic
from memory.paths import ChatFiles, open_private

logger = logging.getLogger(__name__)

SCHEMA = 1
Source = Literal["file", "web"]


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    max_chars: int = 200_000  # TUSK_DOCUMENT_INDEX_MAX_CHARS: one document's text kept (0: none)
    chat_max_chars: int = 2_000_000  # TUSK_DOCUMENT_INDEX_CHAT_MAX_CHARS: all of a chat's documents

    @property
    def on(self) -> bool:
        return self.max_chars > 0 and self.chat_max_chars > 0


@dataclass(frozen=True, slots=True)
class KeptDocument:
    name: str  # the file name as sent, or the page's title (else its URL)
    source: Source
    text: str
    ts: float = field(default_factory=time.time)
    sender_id: str = ""  # who sent the file, or whose turn read the page
    sender_name: str = ""
    url: str | None = None
    what: str = ""  # "PDF, 12 pages", "text", "web page"
    cut: bool = False  # the text was cut at the per-document cap
    path: Path | None = field(default=None, compare=False)  # where it is kept (set when read back)

    def record(self) -> dict[str, object]:
        return {"schema": SCHEMA, "name": self.name, "source": self.source, "url": self.url, "what": self.what,
                "ts": self.ts, "sender_id": self.sender_id, "sender_name": self.sender_name,
                "chars": len(self.text), "cut": self.cut, "text": self.text}


def _id(doc: KeptDocument) -> str:
    return hashlib.sha256(f"{doc.sender_id}\0{doc.source}\0{doc.text}".encode()).hexdigest()[:24]


def keep(files: ChatFiles, doc: KeptDocument, limits: DocumentLimits) -> Path | None:
    """Keep `doc`'s text for search (cut to the cap), then hold the chat to its cap; its path, or None when
    documents are not kept or it has no text."""
    if not limits.on or not doc.text.strip():
        return None
    if len(doc.text) > limits.max_chars:
        doc = KeptDocument(doc.name, doc.source, doc.text[:limits.max_chars], doc.ts, doc.sender_id, doc.sender_name,
                           doc.url, doc.what, cut=True)
    files.ensure()
    path = files.documents / f"{_id(doc)}.json"
    write_atomic(path, json.dumps(doc.record(), ensure_ascii=False))
    _hold_to_cap(files, limits.chat_max_chars, path)
    return path


def _hold_to_cap(files: ChatFiles, chat_max_chars: int, newest: Path) -> None:
    """Remove the oldest documents (never `newest`) while the chat's texts are over `chat_max_chars`."""
    docs = kept(files)
    total = sum(len(d.text) for d in docs)
    for doc in docs:
        if total <= chat_max_chars:
            break
        if doc.path is None or doc.path == newest:
            continue
        doc.path.unlink(missing_ok=True)
        total -= len(doc.text)
        logger.info("documents/ over its cap: the text of %s (%s) is no longer kept for search", doc.path.name,
                    time.strftime("%Y-%m-%d", time.gmtime(doc.ts)))


def read(path: Path) -> KeptDocument | None:
    """The document kept at `path`; None (logged) if it is not one."""
    try:
        with os.fdopen(open_private(path, os.O_RDONLY), encoding="utf-8") as fh:
            rec = json.load(fh)
        if not isinstance(rec, dict) or rec.get("schema") != SCHEMA or not isinstance(rec.get("text"), str):
            raise ValueError("not a kept document")
        source: Source = "web" if rec.get("source") == "web" else "file"
        return KeptDocument(str(rec.get("name") or path.stem), source, rec["text"], float(rec.get("ts") or 0),
                            str(rec.get("sender_id") or ""), str(rec.get("sender_name") or ""),
                            rec.get("url") if isinstance(rec.get("url"), str) else None, str(rec.get("what") or ""),
                            bool(rec.get("cut")), path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        logger.warning("%s is not a kept document (%s): skipped", path, exc)
        return None


def kept_paths(files: ChatFiles) -> list[Path]:
    """The chat's kept documents' files (temporary writes left out)."""
    if not files.documents.is_dir():
        return []
    return sorted(p for p in files.documents.iterdir() if p.suffix == ".json" and not p.name.startswith("."))


def kept(files: ChatFiles) -> list[KeptDocument]:
    """The chat's kept documents, oldest first."""
    docs = [doc for path in kept_paths(files) if (doc := read(path)) is not None]
    return sorted(docs, key=lambda d: (d.ts, d.path.name if d.path else ""))


def of_sender(files: ChatFiles, sender_id: str) -> list[KeptDocument]:
    """The documents `sender_id` sent (or had read) in this chat."""
    return [doc for doc in kept(files) if doc.sender_id == sender_id]
